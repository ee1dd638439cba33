module simapf.benchmarks/watchcache-sort

go 1.26

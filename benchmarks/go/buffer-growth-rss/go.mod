module simapf.benchmarks/buffer-growth-rss

go 1.26

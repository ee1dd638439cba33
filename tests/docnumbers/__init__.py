"""Every number in simapf's documents, accounted for: generated from a run, or checked.

The documents (README.md, docs/*.md, the comment block of each scenarios/*.yaml) are scanned
for numbers (`scan`); each must be a name rather than a quantity (a version, a section, a
commit, ...), a time or speed its words name as the machine's, part of a generated block, or
registered in docs/numbers/ with where it comes from (`registry`, `sources`). How to register
a number: docs/numbers/README.md.

    python tests/docnumbers                # check every number, running the documents' runs
    python tests/docnumbers --fast         # the same without the runs marked slow
    python tests/docnumbers --write        # rewrite the numbers and blocks that runs give
    python tests/docnumbers --todo [DOC]   # the numbers nothing accounts for yet
"""

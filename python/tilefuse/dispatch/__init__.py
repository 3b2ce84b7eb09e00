"""Reading and rewriting IREE's executable sources (phase 1 output).

read.py      one Dispatch record per dispatch function (root, loops, operands)
collapse.py  column reductions: merge the loops IREE leaves uncollapsed
"""

"""Tools for people writing strategies (the design's third way to use tilefuse).

extract.py     one dispatch of a program as a standalone module (`tilefuse dispatches`)
"""

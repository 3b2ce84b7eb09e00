"""Tools for people writing strategies (the design's third way to use tilefuse).

extract.py     one dispatch of a program as a standalone module (`tilefuse dispatches`)
script.py      a user's transform script as a Strategy record the library can clone
try_script.py  `tilefuse try`: the script on dispatches of a model, checked, run, timed
"""

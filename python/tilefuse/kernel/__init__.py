"""What is done to a finished kernel.

verify.py   parse the printed kernel, check what each strategy promises
aliases.py  SPIR-V: narrow accesses onto an alias of their binding; splice for phase 3
ptx.py      assemble PTX with ptxas: registers, spills, shared memory
"""

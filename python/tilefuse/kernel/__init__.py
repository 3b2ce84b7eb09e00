"""What is done to a finished kernel.

verify.py   parse the printed kernel, check what each strategy promises
aliases.py  SPIR-V: narrow accesses onto an alias of their binding
splice.py   SPIR-V: finished kernels out of phase 2, into the sources phase 3 compiles
ptx.py      assemble PTX with ptxas: registers, spills, shared memory
"""

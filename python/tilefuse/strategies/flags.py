"""Library mode: the flags that make a plain `iree-compile` use tilefuse.

`flag_bundle` writes a self-contained transform library for the target
(transform-dialect matchers, each with a built-in strategy specialized for
what it accepts: f32 softmax, lone f32 row sums, loop roots; see
library_variants) and returns the iree-compile flags that load it.

`prepare` and `exact_flag_bundle` are the exact mode: the fused program
`tilefuse compile` would compile, and a library with the exact strategy and
parameters of each of its dispatches (matched by function name), so that
`iree-compile fused.mlir $(tilefuse flags --for fused.mlir)` builds the
kernels `tilefuse compile` builds, but for the exceptions
`exact_library` lists.
"""

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from iree.compiler import ir

from ..errors import TilefuseError
from ..targets import Target, load_target
from . import loop
from .library import add_shared_steps, specialize

LIBRARY_RANKS = (1, 2, 3)  # the grid has three dims; rank 4 needs shapes
LIBRARY_MAX_INPUTS = 8
# Loop roots of rank >= 2: buckets of (B, threads) where B = threads * vector
# divides every dim of the stored result (so the loop's innermost dim, whatever
# the output's permutation, tiles exactly: a masked transposed write does not
# lower); the first bucket that divides wins.
LOOP_BUCKETS = (4, 1)  # threads = preferred_threads // each, while >= a subgroup

# The matchers: each is anchored on a dispatch.tensor.store, reaches the stored root with
# get_producer_of_operand (matchers may only use MatchOpInterface ops: no
# structured.match, no collect_matching), and checks the root and what it
# reads. `iree.match.cast_compatible_dag_from_root` compares a whole DAG
# (ops, attribute dictionaries, bodies; any static shape), so a softmax or a
# row sum is recognised exactly, and only then.
STORE = "iree_tensor_ext.dispatch.tensor.store"
LOAD = "iree_tensor_ext.dispatch.tensor.load"

MATCHER_HEAD = """
  transform.named_sequence @{name}(%store: !transform.any_op {{transform.readonly}})
      -> !transform.any_op {{
    transform.match.operation_name %store ["{store}"] : !transform.any_op
    %root = transform.get_producer_of_operand %store[0] : (!transform.any_op) -> !transform.any_op
"""
MATCHER_TAIL = """    %func = transform.get_parent_op %root <{{op_name = "func.func"}}>
      : (!transform.any_op) -> !transform.any_op
    transform.yield %func : !transform.any_op
  }}
  transform.named_sequence @{action}(%func: !transform.any_op {{transform.readonly}}) {{
    %s = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.transform_dialect_codegen codegen_spec = @{strategy}>
      -> !transform.any_param
    transform.annotate %func "translation_info" = %s : !transform.any_op, !transform.any_param
    transform.yield
  }}
"""


def _cmp(name: str, value: str, pred: str, const: int) -> str:
    return (
        f"      %c_{name} = transform.param.constant {const} : i64 -> !transform.param<i64>\n"
        f"      transform.match.param.cmpi {pred} {value}, %c_{name} : !transform.param<i64>\n"
    )


def _multiple(value: str, dim: int, k: int) -> str:
    if k <= 1:
        return ""
    return (
        f"    transform.iree.match.dim_is_multiple_of {value}[{dim}], {k} : !transform.any_value\n"
    )


def loop_matcher(rank: int, inputs: int, bucket: int) -> str:
    """An all-parallel generic root of this rank and input count, each input
    loaded from a binding (no reduction, contraction or pad feeds it: those
    dispatches are not the loop kernel's); rank >= 2: every dim of the
    stored value divisible by `bucket`."""
    body = (
        "    %m = transform.match.structured failures(propagate) %root\n"
        "        : (!transform.any_op) -> !transform.any_op {\n"
        "    ^bb0(%g: !transform.any_op):\n"
        "      %rank = transform.match.structured.rank %g : (!transform.any_op) -> !transform.param<i64>\n"
        + _cmp("rank", "%rank", "eq", rank)
        + "      %nin = transform.match.structured.num_inputs %g : (!transform.any_op) -> !transform.param<i64>\n"
        + _cmp("nin", "%nin", "eq", inputs)
        + "      %nout = transform.match.structured.num_inits %g : (!transform.any_op) -> !transform.param<i64>\n"
        + _cmp("nout", "%nout", "eq", 1)
        + '      "transform.match.structured.dim"(%g) <{raw_dim_list = array<i64>, is_all, parallel}>\n'
        "        : (!transform.any_op) -> ()\n"
        "      transform.match.structured.yield %g : !transform.any_op\n"
        "    }\n"
    )
    for i in range(inputs):
        body += (
            f"    %p{i} = transform.get_producer_of_operand %root[{i}]"
            " : (!transform.any_op) -> !transform.any_op\n"
            f'    transform.match.operation_name %p{i} ["{LOAD}"] : !transform.any_op\n'
        )
    if rank >= 2 and bucket > 1:
        body += (  # the init operand: the stored value's shape
            f"    %out = transform.get_operand %root[{inputs}]"
            " : (!transform.any_op) -> !transform.any_value\n"
        )
        for d in range(rank):
            body += _multiple("%out", d, bucket)
    return body


ROW_MAP = "affine_map<(d0, d1) -> (d0, d1)>"
COL_MAP = "affine_map<(d0, d1) -> (d0)>"

# A lone row sum of f32 rows (the body as IREE writes a stablehlo.reduce with
# add: accumulator first).
ROW_SUM_DAG = f"""    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {{
    ^bb0(%x: tensor<?x?xf32>, %e: tensor<?xf32>):
      %zero = arith.constant 0.0 : f32
      %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
      %sum = linalg.generic {{indexing_maps = [{ROW_MAP}, {COL_MAP}],
                             iterator_types = ["parallel", "reduction"]}}
          ins(%x : tensor<?x?xf32>) outs(%fill : tensor<?xf32>) {{
      ^bb0(%in: f32, %acc: f32):
        %a = arith.addf %acc, %in : f32
        linalg.yield %a : f32
      }} -> tensor<?xf32>
    }} : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
"""

# Softmax over the rows of [rows, n] f32 as IREE 3.13 decomposes
# linalg.softmax before configuration: max (maxnumf), sum of exp(x - max),
# exp(x - max) / sum.
SOFTMAX_DAG = f"""    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {{
    ^bb0(%x: tensor<?x?xf32>, %e: tensor<?xf32>, %e2: tensor<?x?xf32>):
      %zero = arith.constant 0.0 : f32
      %nan = arith.constant 0xFFC00000 : f32
      %f0 = linalg.fill ins(%nan : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
      %max = linalg.generic {{indexing_maps = [{ROW_MAP}, {COL_MAP}],
                             iterator_types = ["parallel", "reduction"]}}
          ins(%x : tensor<?x?xf32>) outs(%f0 : tensor<?xf32>) {{
      ^bb0(%in: f32, %acc: f32):
        %a = arith.maxnumf %in, %acc : f32
        linalg.yield %a : f32
      }} -> tensor<?xf32>
      %f1 = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
      %sum = linalg.generic {{indexing_maps = [{ROW_MAP}, {COL_MAP}, {COL_MAP}],
                             iterator_types = ["parallel", "reduction"]}}
          ins(%x, %max : tensor<?x?xf32>, tensor<?xf32>) outs(%f1 : tensor<?xf32>) {{
      ^bb0(%in: f32, %m: f32, %acc: f32):
        %a = arith.subf %in, %m : f32
        %b = math.exp %a : f32
        %c = arith.addf %b, %acc : f32
        linalg.yield %c : f32
      }} -> tensor<?xf32>
      %y = linalg.generic {{indexing_maps = [{ROW_MAP}, {COL_MAP}, {COL_MAP}, {ROW_MAP}],
                           iterator_types = ["parallel", "parallel"]}}
          ins(%x, %max, %sum : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>)
          outs(%e2 : tensor<?x?xf32>) {{
      ^bb0(%in: f32, %m: f32, %s: f32, %out: f32):
        %a = arith.subf %in, %m : f32
        %b = math.exp %a : f32
        %c = arith.divf %b, %s : f32
        linalg.yield %c : f32
      }} -> tensor<?x?xf32>
    }} : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
"""


def _row_length(lo: int | None, hi: int | None) -> str:
    """Bounds on n, the root's dim 1 (a loop dim of the root)."""
    text = (
        "    %m = transform.match.structured failures(propagate) %root\n"
        "        : (!transform.any_op) -> !transform.any_op {\n"
        "    ^bb0(%g: !transform.any_op):\n"
        "      %n = transform.match.structured.dim %g[1] : (!transform.any_op) -> !transform.param<i64>\n"
    )
    if lo is not None:
        text += _cmp("lo", "%n", "ge", lo)
    if hi is not None:
        text += _cmp("hi", "%n", "le", hi)
    return text + "      transform.match.structured.yield %g : !transform.any_op\n    }\n"


@dataclass(frozen=True)
class Variant:
    """One matcher and the strategy sequence (specialized) its action names."""

    name: str
    strategy: str  # built-in strategy whose script is specialized
    params: object
    matcher: str  # the matcher body after the root is found
    what: str  # for the docs and the library's comment


def row_warp_variants(target: Target) -> list[Variant]:
    """Lone f32 row sums over [rows, n]: one subgroup per row (row_warp),
    rows that T*V divides (no tail, whose split point is shape-specific),
    at most VECTORS_PER_THREAD chunks (longer rows want several subgroups)."""
    from . import row_reduction
    from .contract import Launch
    from .row_warp import RowWarpParams

    if not target.row_register_elements:
        return []
    t = target.subgroup_size
    out = []
    for v in sorted({target.vector_elements(32, native=True), 1}, reverse=True):
        chunk = t * v
        most = chunk * row_reduction.VECTORS_PER_THREAD
        want = target.packed_row_threads or target.preferred_threads
        for r in sorted({max(1, min(want, target.max_threads) // t), 1}, reverse=True):
            params = RowWarpParams(
                launch=Launch((0, 0, 0), (t, r, 1), t),
                vector=v,
                chunks=1,
                tail=0,
                elementwise_root=False,
                reductions=1,
            )
            matcher = (
                ROW_SUM_DAG
                + "    %x = transform.get_operand %root[0] : (!transform.any_op) -> !transform.any_value\n"
                + _multiple("%x", 1, chunk)
                + _multiple("%x", 0, r)
                + _row_length(chunk, most)
            )
            out.append(
                Variant(
                    f"row_warp_sum_c{chunk}_r{r}",
                    "row_warp",
                    params,
                    matcher,
                    f"f32 row sum, n % {chunk} == 0, {chunk} <= n <= {most}, rows % {r} == 0",
                )
            )
    return out


def softmax_variants(target: Target) -> list[Variant]:
    """f32 softmax over rows: the chunked softmax kernel, T = a subgroup,
    V = a 128-bit vector dividing n; rows the chunk divides (or shorter than
    it: one chunk) need no peeling, longer ragged ones peel the last chunk."""
    from .contract import Launch
    from .softmax import SoftmaxParams

    t = target.subgroup_size
    out = []
    for v in sorted({target.vector_elements(32, native=True), 1}, reverse=True):
        chunk = t * v
        for kind in ("even", "short", "peel"):
            params = SoftmaxParams(
                launch=Launch((0, 0, 0), (t, 1, 1), t),
                vector=v,
                reductions=2,
                shared_bytes=0,
                ragged=kind != "even",
                peel=kind == "peel",
            )
            x = "    %x = transform.get_operand %root[0] : (!transform.any_op) -> !transform.any_value\n"
            if kind == "even":
                check, what = _multiple("%x", 1, chunk), f"n % {chunk} == 0"
            elif kind == "short":
                check, what = (
                    _multiple("%x", 1, v) + _row_length(None, chunk - 1),
                    (f"n % {v} == 0, n < {chunk}"),
                )
            else:
                check, what = (
                    _multiple("%x", 1, v) + _row_length(chunk + 1, None),
                    (f"n % {v} == 0, n > {chunk} (last chunk peeled)"),
                )
            out.append(
                Variant(
                    f"softmax_{kind}_v{v}",
                    "softmax",
                    params,
                    SOFTMAX_DAG + x + check,
                    f"f32 softmax, {what}",
                )
            )
    return out


def loop_variants(target: Target) -> list[Variant]:
    import dataclasses

    out = []
    vector = target.vector_elements(32)
    for rank in LIBRARY_RANKS:
        buckets = (
            [1]
            if rank == 1
            else [
                target.preferred_threads // k * vector
                for k in (1, 4, 16)
                if target.preferred_threads // k >= target.subgroup_size
            ]
        )
        for bucket in buckets:
            for n in range(1, LIBRARY_MAX_INPUTS + 1):
                params = loop.library_params(rank, n, target)
                if bucket > 1:
                    threads = bucket // vector
                    params = dataclasses.replace(
                        params,
                        launch=dataclasses.replace(params.launch, workgroup=(threads, 1, 1)),
                        workgroup_tile=(1,) * (rank - 1) + (bucket,),
                        thread_count=(0,) * (rank - 1) + (threads,),
                        exact=True,
                    )
                what = f"all-parallel rank-{rank} root, {n} loaded inputs" + (
                    f", result dims % {bucket} == 0" if bucket > 1 else ", masked"
                )
                out.append(
                    Variant(
                        f"loop_r{rank}_in{n}" + (f"_b{bucket}" if bucket > 1 else ""),
                        "loop",
                        params,
                        loop_matcher(rank, n, bucket),
                        what,
                    )
                )
    return out


def library_variants(target: Target) -> list[Variant]:
    """Every matcher of the generic library, in the order they are tried."""
    return [*softmax_variants(target), *row_warp_variants(target), *loop_variants(target)]


def build_flags_library(target: Target) -> str:
    ctx = ir.Context()
    variants = library_variants(target)
    text = ["module attributes {transform.with_named_sequence} {"]
    for v in variants:
        text.append(f"  // {v.name}: {v.what}")
        text.append(MATCHER_HEAD.format(name=f"tilefuse_match_{v.name}", store=STORE))
        text.append(v.matcher)
        text.append(
            MATCHER_TAIL.format(action=f"tilefuse_use_{v.name}", strategy=f"tilefuse_{v.name}")
        )
    pairs = ",\n        ".join(
        f"@tilefuse_match_{v.name} -> @tilefuse_use_{v.name}" for v in variants
    )
    text.append(
        "  transform.named_sequence @kernel_config("
        "%variant: !transform.any_op {transform.consumed}) {\n"
        f"    transform.foreach_match in %variant\n        {pairs}\n"
        "      : (!transform.any_op) -> !transform.any_op\n    transform.yield\n  }\n}"
    )
    config = ir.Module.parse("\n".join(text), ctx)
    ip = ir.InsertionPoint.at_block_begin(config.body)
    templates: dict = {}
    for v in variants:
        specialize(v.strategy, v.params, f"tilefuse_{v.name}", ip, ctx, templates)
    add_shared_steps(config, ctx)
    config.operation.verify()
    return (
        f"// Generated by `tilefuse flags --target {target.name}`: library mode.\n"
        "// Matchers, in the order foreach_match tries them (the first that matches a\n"
        "// dispatch's stored root picks its strategy):\n"
        + "".join(f"//   {v.name}: {v.what}\n" for v in variants)
        + str(config)
    )


def default_library_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tilefuse"


def flag_bundle(target_name: str, library_dir: Path | None = None) -> list[str]:
    target = load_target(target_name)
    flags = list(target.compile_flags)
    if target.is_gpu:
        library_dir = library_dir or default_library_dir()
        library_dir.mkdir(parents=True, exist_ok=True)
        path = library_dir / f"library-{target.name}.mlir"
        path.write_text(build_flags_library(target))
        flags.append(f"--iree-codegen-transform-dialect-library={path}@kernel_config")
        flags.append(ONE_THREAD)
    return flags


# IREE 3.13 with a transform library, executables compiled on several
# threads: iree-compile crashed (SIGSEGV in the verifier, mlir::Type::getContext)
# about 1 run in 10 on attention_f32's three dispatches (tests/test_library_exact.py
# met it). The driver always ran its library on one thread (its kernel
# printouts must not interleave); library mode now does too.
ONE_THREAD = "--mlir-disable-threading"


# --- Exact library mode: `tilefuse prepare` and `tilefuse flags --for` -------


def prepare(model, target: str, strategies_dir=None, timeout_s=None) -> tuple[str, list[str]]:
    """The program phase 1 of `tilefuse compile` reads (the fusion stage's
    output: StableHLO rewrites, one flow.dispatch.region per fusion group,
    groups withheld after failures left out; or the program as given, where
    IREE's own formation was kept), and the compile's notes. A whole compile
    runs: which groups survive is known only at its end."""
    from ..driver import compile_program

    kwargs = {"timeout_s": timeout_s} if timeout_s else {}
    result = compile_program(model, target, strategies_dir=strategies_dir, **kwargs)
    c = result.compilation
    return c.phase1_program.text, list(result.notes)


@dataclass
class ExactLibrary:
    """`flags --for`: the library, and what it holds."""

    text: str  # the transform library (@kernel_config matches dispatches by name)
    strategies: dict[str, str]  # dispatch -> strategy the library gives it
    left_out: dict[str, str]  # dispatch -> why the library leaves it to IREE's codegen
    differs: dict[str, str]  # dispatch -> how its kernel differs from `tilefuse compile`'s
    dispatches: list[str]  # every dispatch, in order


def exact_library(model, target: str, strategies_dir=None) -> ExactLibrary:
    """The transform library that gives a plain iree-compile of `model` the
    strategies and parameters `tilefuse compile` gives its dispatches.

    `model` is compiled without fusion planning (IREE forms its dispatches
    as a plain iree-compile of the same file will, with the same names: give
    it what `prepare` wrote). Left out, and said why:
      - dispatches whose loops tilefuse collapses before phase 2
        (dispatch/collapse.py: column reductions): the parameters are for
        the collapsed loops, which a plain iree-compile never sees;
      - dispatches whose strategy failed in tilefuse's own compile.
    On SPIR-V, kernels whose strategy sets alias_narrow_accesses (row_warp)
    are in the library but compile without the aliased bindings the driver
    splices in (kernel/aliases.py): the same kernel, with narrower loads."""
    from ..driver import compile_program
    from . import BY_NAME, registered
    from .library import build_library

    tgt = load_target(target)
    with tempfile.TemporaryDirectory(prefix="tilefuse-flags-") as tmp:
        result = compile_program(
            model, tgt, dump_dir=tmp, fusion=False, strategies_dir=strategies_dir
        )
        c = result.compilation
        collapsed = {
            line.split(":", 1)[0]: line.split(": ", 1)[1]
            for line in c.stage_log
            if " collapsed to " in line
        }
    left_out, differs, kept = {}, {}, []
    for choice in c.choices:
        name = choice.dispatch.name
        if not choice.strategy:
            continue
        if name in c.failures:
            left_out[name] = f"{choice.strategy} failed in tilefuse's compile: {c.failures[name]}"
        elif name in collapsed:
            left_out[name] = (
                f"{choice.strategy}: tilefuse collapses its loops before phase 2 "
                f"({collapsed[name]}); a plain iree-compile does not"
            )
        else:
            kept.append(choice)
            record = BY_NAME.get(choice.strategy)  # None: a user strategy (never aliased)
            if tgt.backend == "spirv" and record and record.alias_narrow_accesses:
                differs[name] = (
                    f"{choice.strategy}: narrow accesses not aliased (kernel/aliases.py); "
                    "IREE reads the binding with its narrowest width"
                )
    with registered(*c.options.user_strategies):
        text = build_library(kept)
    return ExactLibrary(
        text,
        {ch.dispatch.name: ch.strategy for ch in kept},
        left_out,
        differs,
        [ch.dispatch.name for ch in c.choices],
    )


def exact_flag_bundle(
    model, target_name: str, out: Path | None = None, strategies_dir=None
) -> tuple[list[str], ExactLibrary, Path]:
    """The flags for a plain iree-compile of `model` with its exact library
    (written to `out`, default library-<target>-<model stem>.mlir in the
    cache directory)."""
    target = load_target(target_name)
    if not target.is_gpu:
        raise TilefuseError(f"--for: target {target_name} has no tilefuse strategies")
    lib = exact_library(model, target_name, strategies_dir)
    if out is None:
        folder = default_library_dir()
        out = folder / f"library-{target.name}-{Path(str(model)).stem}.mlir"
    out = out.resolve()  # the flag must hold from any directory
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(lib.text)
    flags = [
        *target.compile_flags,
        f"--iree-codegen-transform-dialect-library={out}@kernel_config",
        ONE_THREAD,
    ]
    return flags, lib, out

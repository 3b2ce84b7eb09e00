"""Compilation targets, read from the data files in `pipelines/`.

Strategies take every hardware limit (subgroup size, shared memory, thread
counts, vector width) from a Target, never from constants of their own.
"""

import tomllib
from dataclasses import MISSING, dataclass, fields, replace

from .errors import TilefuseError
from .paths import PIPELINES

# Fields that work around IREE or driver bugs rather than state a hardware
# fact; a pipelines/*.toml sets them under [workarounds].
WORKAROUNDS = {"bf16_vector_elements", "float_minmax_as_keys", "grouped_convs_rewritten"}
# SPIR-V vectors hold 2 to 4 elements (8 and 16 need the Vector16 capability).
SPIRV_VECTOR_ELEMENTS = 4


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    backend: str  # "spirv", "cuda" or "cpu"
    runtime_driver: str  # IREE runtime driver: "vulkan", "cuda", "local-task"
    compile_flags: tuple[str, ...]
    subgroup_size: int
    shared_memory_bytes: int
    max_threads: int
    preferred_threads: int
    vector_bits: int
    max_workgroup_count: tuple[int, int, int]
    ptxas_arch: str | None = None
    device_target: str | None = None  # module-carried #hal.device.target
    # Workaround: cap on bf16 vector width, if any.
    bf16_vector_elements: int | None = None
    # Threads of a workgroup that packs several short rows (one subgroup
    # each) of a row reduction; preferred_threads when not given.
    packed_row_threads: int | None = None
    # The same for kernels with barriers between their phases (softmax).
    packed_synced_row_threads: int | None = None
    # Subgroups are formed from consecutive x only (Mesa lavapipe runs x in
    # SIMD steps, y and z in loops): a workgroup narrower than a subgroup in
    # x leaves lanes idle, so kernels put their wider thread dim on x.
    subgroups_along_x: bool = False
    # Workaround: float max/min row reductions run on ordered integer keys
    # (hlo/minmax.py): IREE's SPIR-V lowering of a lane's vector max/min
    # drops NaN, and scalars instead run far slower on lavapipe
    # (docs/findings.md, 'Float max/min on SPIR-V').
    float_minmax_as_keys: bool = False
    # Workaround: convolutions with feature_group_count > 1 (and more than
    # one input feature per group) are rewritten as depthwise ones and a
    # sum, or one per group (hlo/grouped_convs.py): IREE's SPIR-V codegen
    # of them writes wrong values (docs/findings.md, 'Grouped convolutions
    # on SPIR-V').
    grouped_convs_rewritten: bool = False
    # Elements of a row each lane may keep in registers (N / subgroup size):
    # up to this, a softmax-like row runs on one subgroup with the row in
    # registers (strategies/row_warp.py; longer rows on several subgroups,
    # below); 0 turns that kernel off, for row reductions too.
    row_register_elements: int = 0
    # V-vectors of a row each thread of the softmax kernel takes, about: it
    # sizes T, the threads per row, as the power of two nearest above
    # N / (V * this), from one subgroup to min(max_threads, subgroup_size**2)
    # (strategies/softmax.py). A row whose T threads then split it evenly,
    # each holding at most row_register_elements, stays in registers on
    # them (strategies/row_warp.py: loaded once, no loop). lavapipe keeps 64
    # (few threads keep its combines cheap: it runs a workgroup's subgroups
    # one after another); a GPU wants many threads per row, each with a few
    # vectors in flight (memory-level parallelism).
    softmax_vectors_per_thread: int = 64
    # Streaming multiprocessors (compute units) of the GPU the target is
    # built for; 0: unknown. A kernel whose grid has fewer workgroups leaves
    # some idle (the matmul kernels pick smaller tiles then).
    multiprocessors: int = 0
    # Threads one multiprocessor keeps resident at once (2048 on sm_80 and
    # sm_90, pipelines/hardware/gpus.toml); 0: unknown. With
    # `multiprocessors` it says how many threads fill the GPU (the column
    # kernel sizes its workgroups by it).
    multiprocessor_threads: int = 0
    # A column reduction whose kernel would have fewer workgroups than
    # `multiprocessors` (2 where unknown) is split in two steps over the
    # grid when it reads at least this many bytes (hlo/column_splits.py);
    # 0: never split.
    column_split_bytes: int = 0
    # Neighbouring threads' accesses must be neighbouring addresses for full
    # bandwidth (a GPU's coalescing); false for lavapipe, which runs the
    # kernels on the CPU, where caches absorb strides (the transpose kernel
    # stages through workgroup memory only where this holds).
    coalescing_matters: bool = True
    # The cooperative-matrix (KHR) shape [M, N, K] the device multiplies f16
    # in, f16 or f32 accumulators (what IREE's --iree-vulkan-target lists as
    # its mma intrinsics: NV_WMMA_*_16x16x16_F16 on ampere, WMMAR3_* on
    # rdna3); () where it has none (lavapipe): the matmul_coop kernel's.
    cooperative_matrix: tuple[int, ...] = ()
    # One-row products (no M loop) whose N no exact tile fits take the
    # matmul kernel's masked tiles; false where those were measured slower
    # than IREE's kernel (lavapipe: every masked read of B is four guarded
    # scalar loads).
    one_row_masked_tiles: bool = True
    # f16 and bf16 x bf16 -> f32 contractions on tensor cores through IREE's
    # own TileAndFuse pipeline with tilefuse's tiles
    # (strategies/matmul_mma_iree.py); the CUDA targets' files turn it on.
    # Off, f16 takes the own mma.sync kernel (matmul_mma) and bf16 the FMA
    # one (`explain` says so).
    iree_mma: bool = False
    # With iree_mma: products whose M, N or K no tile divides (ragged
    # shapes, M and N of at least 16) on the same configuration with
    # IREE's `padding` (the pipeline pads each tile of A and B itself, as
    # IREE's own configuration for such shapes does). Off by default until
    # a GPU run checks its numerics (docs/findings.md, 'Ragged shapes on
    # IREE's configuration'); off, they take the FMA kernel.
    iree_mma_padding: bool = False
    # Products of at most this many rows (M) take an operand's prologue (a
    # dequantization, convert(w) * scale) into the FMA matmul kernel's
    # dispatch; 0: any. Where taller products run on tensor cores or
    # cooperative matrices, whose kernels read operands as loaded, the
    # prologue stays a dispatch of its own for them (fusion/rules.py,
    # strategies/matmul.py).
    prologue_rows: int = 0
    # f32 x f32 -> f32 contractions on tensor cores as TF32 (operands
    # rounded to 10 bits of mantissa, as XLA's default precision on
    # Ampere and later does); off by default: the program asked for f32.
    tf32: bool = False

    @property
    def is_gpu(self) -> bool:
        return self.backend in ("spirv", "cuda")

    def vector_elements(
        self,
        bits: int,
        bf16: bool = False,
        native: bool = False,
        narrow_ints: bool = False,
        offset_alignment: int = 0,
    ) -> int:
        """Elements of one vector access of `bits`-wide elements: vector_bits
        of them, capped for bf16 (bf16_vector_elements). `native`: one
        SPIR-V vector (at most 4 elements), for vectors a kernel keeps in
        registers and reduces; loads and stores IREE splits itself.
        `narrow_ints`: the kernel sign-extends an integer narrower than 32
        bits or truncates a 16-bit one to 8 bits, also one SPIR-V vector.
        IREE 3.13 moves a longer vector of i8 as i32 words: it takes an
        i8 -> i16 convert's 8 lanes out with logical shifts, so the sign is
        lost, and packs a ui16 -> ui8 convert's 8 lanes into words with
        shifts done in i16, so the upper two bytes of each word are lost
        (tests/test_loop_numerics.py).
        `offset_alignment`: the bytes the dispatch's binding offsets are a
        multiple of (Dispatch.offset_alignment; 0: none): on SPIR-V a vector
        access must divide it, since IREE indexes a binding by whole vectors
        and a 16-byte vector at a 24-byte offset landed at 16 (a
        concatenate's piece written 2 elements early)."""
        n = max(1, self.vector_bits // bits)
        if (native or narrow_ints) and self.backend == "spirv":
            n = min(n, SPIRV_VECTOR_ELEMENTS)
        if bf16 and self.bf16_vector_elements:
            n = min(n, self.bf16_vector_elements)
        if offset_alignment and self.backend == "spirv":
            while n > 1 and offset_alignment % (n * max(bits, 8) // 8):
                n //= 2
        return n

    def grid_refusal(self, grid) -> str | None:
        """Why a launch of `grid` workgroups (x, y, z) exceeds the target, or None."""
        for axis, (count, limit) in enumerate(zip(grid, self.max_workgroup_count)):
            if count > limit:
                return f"grid {'xyz'[axis]} would be {count} > {limit} workgroups"
        return None


def target_names() -> list[str]:
    return sorted(p.stem for p in PIPELINES.glob("*.toml"))


def load_target(name: str) -> Target:
    """The target pipelines/NAME.toml describes. NAME may carry overrides of
    its fields after commas, each a TOML value (`cuda-sm90,iree_mma=true`):
    for trying a switch without writing a target file; the overridden name
    is the target's name, so a bundle or report records it."""
    base, comma, rest = name.partition(",")
    target = _load_file(base)
    if not comma:
        return target
    # FIELD=VALUE,FIELD=VALUE is a TOML inline table's body: a value may
    # itself hold commas (compile_flags=["--a", "--b"]).
    try:
        given = tomllib.loads(f"v = {{{rest}}}")["v"]
    except tomllib.TOMLDecodeError as e:
        raise TilefuseError(
            f"target overrides '{rest}': not a TOML value; expected FIELD=VALUE pairs ({e})"
        ) from None
    known = {f.name for f in fields(Target) if f.name != "name"}
    values = {}
    for key, value in given.items():
        if key not in known:
            raise TilefuseError(
                f"target override '{key}': no such field of a target (fields: {', '.join(sorted(known))})"
            )
        value = tuple(value) if isinstance(value, list) else value
        current = getattr(target, key)
        if current is not None and type(value) is not type(current):
            raise TilefuseError(
                f"target override '{key}': {key} is a {type(current).__name__}, "
                f"not a {type(value).__name__}"
            )
        values[key] = value
    return replace(target, name=name, **values)


def _load_file(name: str) -> Target:
    path = PIPELINES / f"{name}.toml"
    if not path.is_file():
        raise TilefuseError(f"unknown target '{name}'; known targets: {', '.join(target_names())}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TilefuseError(f"not valid TOML: {e}", str(path)) from None
    workarounds = data.pop("workarounds", {})
    facts = {f.name: f for f in fields(Target) if f.name != "name" and f.name not in WORKAROUNDS}
    # A typo must not silently turn a kernel off.
    for table, given, known in (("", data, facts), ("[workarounds] ", workarounds, WORKAROUNDS)):
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise TilefuseError(f"unknown {table}keys {unknown}; known: {sorted(known)}", str(path))
    missing = sorted(k for k, f in facts.items() if k not in data and _required(f))
    if missing:
        raise TilefuseError(f"missing keys {missing}", str(path))
    values = {**data, **workarounds}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return Target(name=name, **values)


def _required(f) -> bool:
    return f.default is MISSING and f.default_factory is MISSING

"""Bench results as a terminal table, JSON, and a markdown report with a chart.

Every ratio is tilefuse / IREE: below 1 means tilefuse moves fewer bytes, is
modeled faster, runs faster on lavapipe or compiles faster.
"""

import math
from pathlib import Path

from ..errors import TilefuseError
from ..paths import shown
from .measure import median
from .run import COMPILERS, ModelResult

MB = 1e6


def _ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def _fmt(value, spec=".2f", missing="-") -> str:
    return missing if value is None else format(value, spec)


def summary_row(r: ModelResult, gpu: str) -> dict:
    """The figures of one model that the table, the JSON and the chart share."""
    tf, iree = r.runs["tilefuse"], r.runs["iree"]
    modeled = r.modeled_seconds[gpu]
    wall = {c: median(r.runs[c].wall_seconds) for c in COMPILERS}
    # The ratio is the median of the rounds' own ratios: the two compilers'
    # calls alternate, so a drift of the machine's speed (a shared VM) hits
    # both calls of a round alike and cancels.
    paired = [a / b for a, b in zip(tf.wall_seconds, iree.wall_seconds) if b > 0]
    return {
        "model": r.name,
        "dispatches": {c: r.runs[c].dispatch_count for c in COMPILERS},
        "bytes": {c: r.runs[c].costs.bytes for c in COMPILERS},
        "floor_bytes": r.floor_bytes,
        "bytes_over_floor": {
            c: r.runs[c].costs.bytes / r.floor_bytes if r.floor_bytes else None for c in COMPILERS
        },
        "modeled_us": {c: modeled[c] * 1e6 for c in COMPILERS},
        "modeled_ratio": _ratio(modeled["tilefuse"], modeled["iree"]),
        "wall_ms": {c: None if wall[c] is None else wall[c] * 1e3 for c in COMPILERS},
        "wall_ratio": median(paired),
        "compile_s": {c: r.runs[c].compile_seconds for c in COMPILERS},
        "compile_ratio": _ratio(tf.compile_seconds, iree.compile_seconds),
        "numerics": r.numerics,
    }


COLUMNS = [
    ("model", lambda s: s["model"]),
    ("dispatches tf/iree", lambda s: f"{s['dispatches']['tilefuse']}/{s['dispatches']['iree']}"),
    (
        "MB tf/iree",
        lambda s: f"{s['bytes']['tilefuse'] / MB:.2f}/{s['bytes']['iree'] / MB:.2f}",
    ),
    ("floor MB", lambda s: f"{s['floor_bytes'] / MB:.2f}"),
    (
        "bytes/floor tf/iree",
        lambda s: (
            f"{_fmt(s['bytes_over_floor']['tilefuse'])}/{_fmt(s['bytes_over_floor']['iree'])}"
        ),
    ),
    (
        "modeled us tf/iree (ratio)",
        lambda s: (
            f"{s['modeled_us']['tilefuse']:.1f}/{s['modeled_us']['iree']:.1f} "
            f"({_fmt(s['modeled_ratio'])})"
        ),
    ),
    (
        "lavapipe ms tf/iree (ratio)",
        lambda s: (
            f"{_fmt(s['wall_ms']['tilefuse'], '.1f')}/{_fmt(s['wall_ms']['iree'], '.1f')} "
            f"({_fmt(s['wall_ratio'])})"
        ),
    ),
    (
        "compile s tf/iree (ratio)",
        lambda s: (
            f"{s['compile_s']['tilefuse']:.1f}/{s['compile_s']['iree']:.1f} "
            f"({_fmt(s['compile_ratio'])})"
        ),
    ),
    ("numerics", lambda s: s["numerics"]),
]


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*row) for row in [header, *rows])


def summary_table(results: list[ModelResult], gpu: str, markdown: bool = False) -> str:
    rows = [[str(get(summary_row(r, gpu))) for _, get in COLUMNS] for r in results]
    if len(results) > 1:
        rows.append(total_row(results))
    return _table([name for name, _ in COLUMNS], rows, markdown)


def total_row(results: list[ModelResult]) -> list[str]:
    """Dispatches and bytes summed over the models, bytes/floor as the
    geometric mean of the models' own ratios (a model with no floor left out)."""
    dispatches = {c: sum(r.runs[c].dispatch_count for r in results) for c in COMPILERS}
    moved = {c: sum(r.runs[c].costs.bytes for r in results) for c in COMPILERS}
    floor = sum(r.floor_bytes for r in results)
    geomean = {}
    for c in COMPILERS:
        ratios = [r.runs[c].costs.bytes / r.floor_bytes for r in results if r.floor_bytes]
        ratios = [x for x in ratios if x > 0]
        geomean[c] = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    row = {
        "model": f"all {len(results)} (sum; bytes/floor: geomean)",
        "dispatches tf/iree": f"{dispatches['tilefuse']}/{dispatches['iree']}",
        "MB tf/iree": f"{moved['tilefuse'] / MB:.2f}/{moved['iree'] / MB:.2f}",
        "floor MB": f"{floor / MB:.2f}",
        "bytes/floor tf/iree": f"{_fmt(geomean['tilefuse'])}/{_fmt(geomean['iree'])}",
    }
    return [row.get(name, "-") for name, _ in COLUMNS]


def kernel_table(results: list[ModelResult], markdown: bool = False) -> str:
    header = ["model", "compiler", "kernel", "arch", "regs", "spill B", "smem B", "threads", "occ."]
    rows = []
    for r in results:
        for compiler in COMPILERS:
            for k in r.kernels.get(compiler, []):
                rows.append(
                    [
                        r.name,
                        compiler,
                        k.kernel,
                        k.arch,
                        str(k.registers),
                        str(k.spill_bytes),
                        str(k.shared_bytes),
                        str(k.threads),
                        f"{k.occupancy:.0%}",
                    ]
                )
    return _table(header, rows, markdown) if rows else ""


def dispatch_table(r: ModelResult, markdown: bool = True) -> str:
    header = ["compiler", "dispatch", "read MB", "written MB", "Mflop"]
    rows = [
        [c, d.name, f"{d.read_bytes / MB:.3f}", f"{d.write_bytes / MB:.3f}", f"{d.flops / 1e6:.1f}"]
        for c in COMPILERS
        for d in r.runs[c].costs.dispatches
    ]
    return _table(header, rows, markdown)


def to_json(results: list[ModelResult], gpu: str) -> dict:
    models = []
    for r in results:
        row = summary_row(r, gpu)
        row.update(
            source=r.source,
            target=r.target,
            modeled_seconds_by_gpu=r.modeled_seconds,
            wall_seconds={c: r.runs[c].wall_seconds for c in COMPILERS},
            dispatch_repeat=r.runs["tilefuse"].timing_repeat,
            reference=r.reference,
            tolerance=r.tolerance,
            max_error=r.max_error,
            max_difference=r.max_difference,
            per_dispatch={
                c: [
                    {
                        "name": d.name,
                        "read_bytes": d.read_bytes,
                        "write_bytes": d.write_bytes,
                        "flops": d.flops,
                        "tensor_core_flops": d.tensor_core_flops,
                    }
                    for d in r.runs[c].costs.dispatches
                ]
                for c in COMPILERS
            },
            kernels={c: [vars(k) for k in ks] for c, ks in r.kernels.items()},
            strategies=r.runs["tilefuse"].notes,
        )
        models.append(row)
    return {"gpu": gpu, "models": models}


def write_chart(results: list[ModelResult], gpu: str, path: Path) -> None:
    """Grouped bars: per model, each tilefuse/IREE ratio (1.0 = parity)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TilefuseError(
            "--report draws its chart with matplotlib: pip install -e '.[bench]'"
        ) from None
    rows = [summary_row(r, gpu) for r in results]
    series = {
        "HBM bytes": [_ratio(s["bytes"]["tilefuse"], s["bytes"]["iree"]) for s in rows],
        f"modeled time ({gpu})": [s["modeled_ratio"] for s in rows],
        "lavapipe wall time": [s["wall_ratio"] for s in rows],
        "compile time": [s["compile_ratio"] for s in rows],
    }
    series = {k: v for k, v in series.items() if any(x is not None for x in v)}
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        xs = [j + i * width for j in range(len(rows))]
        ax.bar(xs, [v if v is not None else 0 for v in values], width, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))])
    ax.set_xticklabels([s["model"] for s in rows], rotation=20, ha="right")
    ax.set_ylabel("tilefuse / IREE (lower is better)")
    ax.set_title(f"tilefuse vs IREE, target {results[0].target}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown_report(results: list[ModelResult], gpu: str, chart_name: str | None) -> str:
    target = results[0].target
    parts = [
        f"# tilefuse bench: target {target}",
        "",
        (
            "Ratios are tilefuse / IREE (lower is better). HBM bytes are what each dispatch "
            "loads and stores (from the executable sources); the floor is the model's inputs "
            "read once plus its outputs written once. Modeled time: per dispatch "
            f"max(bytes / bandwidth, flops / peak) + 1 us launch, on {gpu}. Lavapipe wall "
            "time is Vulkan on this machine's CPU: a proxy for trends, not GPU time."
        ),
        "",
        f"![ratios]({chart_name})" if chart_name else f"(No chart past {CHART_MODELS} models.)",
        "",
        summary_table(results, gpu, markdown=True),
    ]
    kernels = kernel_table(results, markdown=True)
    if kernels:
        parts += ["", "## Kernels (ptxas -v)", "", kernels]
    for r in results:
        parts += ["", f"## {r.name}", "", f"source `{shown(r.source)}`, numerics: {r.numerics}"]
        parts += ["", "tilefuse strategies:", ""]
        parts += [f"- `{line}`" for line in r.runs["tilefuse"].notes]
        parts += ["", dispatch_table(r)]
    return "\n".join(parts) + "\n"


# Past this many models a bar chart is unreadable; the table has every ratio.
CHART_MODELS = 30


def write_report(
    results: list[ModelResult],
    gpu: str,
    directory: Path,
    skipped: list[tuple[str, str]] = (),
) -> Path:
    """The markdown report (and its chart); `skipped` (model, why) are the
    models --keep-going left out, listed at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    chart = f"ratios-{results[0].target}.png"
    if len(results) <= CHART_MODELS:
        write_chart(results, gpu, directory / chart)
    else:
        chart = None
    path = directory / f"bench-{results[0].target}.md"
    text = markdown_report(results, gpu, chart)
    if skipped:
        text += "\n## Skipped (a compiler could not compile them)\n\n"
        text += "".join(f"- {name}: {why}\n" for name, why in skipped)
    path.write_text(text)
    return path

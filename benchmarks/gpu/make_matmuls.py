"""Writes the matmul programs of this folder (StableHLO, as JAX writes a
dot_general of bf16 or f16 arrays: the result in the operands' type).

    python benchmarks/gpu/make_matmuls.py

MATMULS names each program: [M, K] @ [K, N] in `dtype`, then its epilogue,
in order: + bias[N], tanh GELU, + residual[M, N]; "b_nk" in that tuple
stores B as [N, K] (torch's and most checkpoints' weight layout), which the
program transposes before the product as JAX writes x @ W.T. torch_peers.py beside
this holds the same table (the bundle carries that file alone), and
tests/test_benchmarks.py checks both against the files.
"""

from pathlib import Path

HERE = Path(__file__).parent

MATMULS = {
    "matmul_bias_1024_bf16": (1024, 1024, 1024, ("bias",), "bf16"),
    "matmul_bias_4096_bf16": (4096, 4096, 4096, ("bias",), "bf16"),
    "matmul_8192_bf16": (8192, 8192, 8192, (), "bf16"),
    "matmul_4096_f16": (4096, 4096, 4096, (), "f16"),
    "matmul_8192_f16": (8192, 8192, 8192, (), "f16"),
    "mlp_up_gelu_bf16": (2048, 768, 3072, ("bias", "gelu"), "bf16"),
    "mlp_up_gelu_f16": (2048, 768, 3072, ("bias", "gelu"), "f16"),
    "mlp_down_residual_bf16": (2048, 3072, 768, ("bias", "residual"), "bf16"),
    "decode_m1_bf16": (1, 4096, 4096, (), "bf16"),
    "decode_m1_nk_bf16": (1, 4096, 4096, ("b_nk",), "bf16"),
    "decode_m16_bf16": (16, 4096, 4096, (), "bf16"),
    "decode_m16_f16": (16, 4096, 4096, (), "f16"),
    "llama_up_bf16": (4096, 4096, 11008, (), "bf16"),
    "decode_m16_gelu_f16": (16, 4096, 4096, ("bias", "gelu"), "f16"),
    "matmul_ragged_1000_f16": (1000, 1000, 1000, ("bias",), "f16"),
    "mlp_up_gelu_ragged_bf16": (154, 768, 3072, ("bias", "gelu"), "bf16"),
}
# tanh GELU's constants as the corpus's JAX programs hold them in bf16.
GELU = {"k0": "4.467770e-02", "k1": "7.978850e-01", "one": "1.000000e+00", "half": "5.000000e-01"}


def program(m: int, k: int, n: int, epilogue: tuple, t: str) -> str:
    a, b, o = f"tensor<{m}x{k}x{t}>", f"tensor<{k}x{n}x{t}>", f"tensor<{m}x{n}x{t}>"
    args = [f"%a: {a}", f"%b: {b}"]
    body = []
    if "b_nk" in epilogue:
        b_nk = f"tensor<{n}x{k}x{t}>"
        args[1] = f"%w: {b_nk}"
        body.append(f"    %b = stablehlo.transpose %w, dims = [1, 0] : ({b_nk}) -> {b}")
    body.append(
        f"    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : ({a}, {b}) -> {o}"
    )
    last = "%0"
    if "bias" in epilogue:
        args.append(f"%bias: tensor<{n}x{t}>")
        body.append(
            f"    %bb = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<{n}x{t}>) -> {o}"
        )
        body.append(f"    %1 = stablehlo.add {last}, %bb : {o}")
        last = "%1"
    if "gelu" in epilogue:
        for i, value in enumerate(GELU.values()):
            body.append(f"    %c{i} = stablehlo.constant dense<{value}> : tensor<{t}>")
            body.append(
                f"    %k{i} = stablehlo.broadcast_in_dim %c{i}, dims = [] : (tensor<{t}>) -> {o}"
            )
        x = last
        body += [
            f"    %g0 = stablehlo.multiply {x}, {x} : {o}",
            f"    %g1 = stablehlo.multiply %g0, {x} : {o}",
            f"    %g2 = stablehlo.multiply %k0, %g1 : {o}",
            f"    %g3 = stablehlo.add {x}, %g2 : {o}",
            f"    %g4 = stablehlo.multiply %k1, %g3 : {o}",
            f"    %g5 = stablehlo.tanh %g4 : {o}",
            f"    %g6 = stablehlo.add %k2, %g5 : {o}",
            f"    %g7 = stablehlo.multiply %k3, %g6 : {o}",
            f"    %g8 = stablehlo.multiply {x}, %g7 : {o}",
        ]
        last = "%g8"
    if "residual" in epilogue:
        args.append(f"%res: {o}")
        body.append(f"    %r = stablehlo.add {last}, %res : {o}")
        last = "%r"
    head = f"// {m}x{k} @ {k}x{n} {t}" + (f" (B stored as {n}x{k})" if "b_nk" in epilogue else "")
    ops = [e for e in epilogue if e != "b_nk"]
    head += f", epilogue: {' + '.join(ops)}\n" if ops else "\n"
    return (
        head
        + f"func.func @main({', '.join(args)}) -> {o} {{\n"
        + "\n".join(body)
        + f"\n    return {last} : {o}\n}}\n"
    )


if __name__ == "__main__":
    for name, spec in MATMULS.items():
        (HERE / f"{name}.mlir").write_text(program(*spec))
        print(f"wrote {HERE / name}.mlir")

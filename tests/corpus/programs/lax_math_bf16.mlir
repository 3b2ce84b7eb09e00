module @jit_lax_math_bf16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xbf16>, %arg1: tensor<32x48xbf16>) -> (tensor<32x48xbf16> {jax.result_info = "result['cos']"}, tensor<32x48xbf16> {jax.result_info = "result['erf']"}, tensor<32x48xbf16> {jax.result_info = "result['exp']"}, tensor<32x48xbf16> {jax.result_info = "result['expm1']"}, tensor<32x48xbf16> {jax.result_info = "result['log']"}, tensor<32x48xbf16> {jax.result_info = "result['log1p']"}, tensor<32x48xbf16> {jax.result_info = "result['logistic']"}, tensor<32x48xbf16> {jax.result_info = "result['rsqrt']"}, tensor<32x48xbf16> {jax.result_info = "result['sin']"}, tensor<32x48xbf16> {jax.result_info = "result['sqrt']"}, tensor<32x48xbf16> {jax.result_info = "result['tanh']"}) {
    %0 = stablehlo.exponential %arg0 : tensor<32x48xbf16>
    %1 = stablehlo.exponential_minus_one %arg0 : tensor<32x48xbf16>
    %2 = stablehlo.tanh %arg0 : tensor<32x48xbf16>
    %3 = stablehlo.sine %arg0 : tensor<32x48xbf16>
    %4 = stablehlo.cosine %arg0 : tensor<32x48xbf16>
    %5 = stablehlo.negate %arg0 : tensor<32x48xbf16>
    %6 = stablehlo.exponential %5 : tensor<32x48xbf16>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %7 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<32x48xbf16>
    %8 = stablehlo.add %7, %6 : tensor<32x48xbf16>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %9 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<bf16>) -> tensor<32x48xbf16>
    %10 = stablehlo.divide %9, %8 : tensor<32x48xbf16>
    %11 = chlo.erf %arg0 : tensor<32x48xbf16> -> tensor<32x48xbf16>
    %12 = stablehlo.log %arg1 : tensor<32x48xbf16>
    %13 = stablehlo.log_plus_one %arg1 : tensor<32x48xbf16>
    %14 = stablehlo.sqrt %arg1 : tensor<32x48xbf16>
    %15 = stablehlo.rsqrt %arg1 : tensor<32x48xbf16>
    return %4, %11, %0, %1, %12, %13, %10, %15, %3, %14, %2 : tensor<32x48xbf16>, tensor<32x48xbf16>, tensor<32x48xbf16>, tensor<32x48xbf16>, tensor<32x48xbf16>, tensor<32x48xbf16>, tensor<32x48xbf16>, tensor<32x48xbf16>, tensor<32x48xbf16>, tensor<32x48xbf16>, tensor<32x48xbf16>
  }
}

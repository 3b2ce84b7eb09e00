module @jit_lax_math_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xf32>, %arg1: tensor<32x48xf32>) -> (tensor<32x48xf32> {jax.result_info = "result['cos']"}, tensor<32x48xf32> {jax.result_info = "result['erf']"}, tensor<32x48xf32> {jax.result_info = "result['exp']"}, tensor<32x48xf32> {jax.result_info = "result['expm1']"}, tensor<32x48xf32> {jax.result_info = "result['log']"}, tensor<32x48xf32> {jax.result_info = "result['log1p']"}, tensor<32x48xf32> {jax.result_info = "result['logistic']"}, tensor<32x48xf32> {jax.result_info = "result['rsqrt']"}, tensor<32x48xf32> {jax.result_info = "result['sin']"}, tensor<32x48xf32> {jax.result_info = "result['sqrt']"}, tensor<32x48xf32> {jax.result_info = "result['tanh']"}) {
    %0 = stablehlo.exponential %arg0 : tensor<32x48xf32>
    %1 = stablehlo.exponential_minus_one %arg0 : tensor<32x48xf32>
    %2 = stablehlo.tanh %arg0 : tensor<32x48xf32>
    %3 = stablehlo.sine %arg0 : tensor<32x48xf32>
    %4 = stablehlo.cosine %arg0 : tensor<32x48xf32>
    %5 = stablehlo.negate %arg0 : tensor<32x48xf32>
    %6 = stablehlo.exponential %5 : tensor<32x48xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<32x48xf32>
    %8 = stablehlo.add %7, %6 : tensor<32x48xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<32x48xf32>
    %10 = stablehlo.divide %9, %8 : tensor<32x48xf32>
    %11 = chlo.erf %arg0 : tensor<32x48xf32> -> tensor<32x48xf32>
    %12 = stablehlo.log %arg1 : tensor<32x48xf32>
    %13 = stablehlo.log_plus_one %arg1 : tensor<32x48xf32>
    %14 = stablehlo.sqrt %arg1 : tensor<32x48xf32>
    %15 = stablehlo.rsqrt %arg1 : tensor<32x48xf32>
    return %4, %11, %0, %1, %12, %13, %10, %15, %3, %14, %2 : tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x48xf32>
  }
}

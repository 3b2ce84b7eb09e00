module @jit_gelu_erf_f16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x128xf16>) -> (tensor<16x128xf16> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<5.000000e-01> : tensor<f16>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f16>) -> tensor<16x128xf16>
    %1 = stablehlo.multiply %0, %arg0 : tensor<16x128xf16>
    %2 = stablehlo.negate %arg0 : tensor<16x128xf16>
    %cst_0 = stablehlo.constant dense<7.070310e-01> : tensor<f16>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f16>) -> tensor<16x128xf16>
    %4 = stablehlo.multiply %2, %3 : tensor<16x128xf16>
    %5 = chlo.erfc %4 : tensor<16x128xf16> -> tensor<16x128xf16>
    %6 = stablehlo.multiply %1, %5 : tensor<16x128xf16>
    return %6 : tensor<16x128xf16>
  }
}

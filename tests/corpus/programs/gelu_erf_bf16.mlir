module @jit_gelu_erf_bf16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x128xbf16>) -> (tensor<16x128xbf16> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<5.000000e-01> : tensor<bf16>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<16x128xbf16>
    %1 = stablehlo.multiply %0, %arg0 : tensor<16x128xbf16>
    %2 = stablehlo.negate %arg0 : tensor<16x128xbf16>
    %cst_0 = stablehlo.constant dense<7.070310e-01> : tensor<bf16>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<bf16>) -> tensor<16x128xbf16>
    %4 = stablehlo.multiply %2, %3 : tensor<16x128xbf16>
    %5 = chlo.erfc %4 : tensor<16x128xbf16> -> tensor<16x128xbf16>
    %6 = stablehlo.multiply %1, %5 : tensor<16x128xbf16>
    return %6 : tensor<16x128xbf16>
  }
}

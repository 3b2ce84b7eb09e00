module @jit_squareplus_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x128xf32>) -> (tensor<16x128xf32> {jax.result_info = "result"}) {
    %0 = call @squareplus(%arg0) : (tensor<16x128xf32>) -> tensor<16x128xf32>
    return %0 : tensor<16x128xf32>
  }
  func.func private @squareplus(%arg0: tensor<16x128xf32>) -> tensor<16x128xf32> {
    %0 = chlo.square %arg0 : tensor<16x128xf32> -> tensor<16x128xf32>
    %cst = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x128xf32>
    %2 = stablehlo.add %0, %1 : tensor<16x128xf32>
    %3 = stablehlo.sqrt %2 : tensor<16x128xf32>
    %4 = stablehlo.add %arg0, %3 : tensor<16x128xf32>
    %cst_0 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<16x128xf32>
    %6 = stablehlo.divide %4, %5 : tensor<16x128xf32>
    return %6 : tensor<16x128xf32>
  }
}

module @jit_soft_sign_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x128xf32>) -> (tensor<16x128xf32> {jax.result_info = "result"}) {
    %0 = call @soft_sign(%arg0) : (tensor<16x128xf32>) -> tensor<16x128xf32>
    return %0 : tensor<16x128xf32>
  }
  func.func private @soft_sign(%arg0: tensor<16x128xf32>) -> tensor<16x128xf32> {
    %0 = stablehlo.abs %arg0 : tensor<16x128xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x128xf32>
    %2 = stablehlo.add %0, %1 : tensor<16x128xf32>
    %3 = stablehlo.divide %arg0, %2 : tensor<16x128xf32>
    return %3 : tensor<16x128xf32>
  }
}

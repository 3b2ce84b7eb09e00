module @jit_mean_axis0_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<256x32xf32>) -> (tensor<32xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<256x32xf32>, tensor<f32>) -> tensor<32xf32>
    %cst_0 = stablehlo.constant dense<2.560000e+02> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %2 = stablehlo.divide %0, %1 : tensor<32xf32>
    return %2 : tensor<32xf32>
  }
}

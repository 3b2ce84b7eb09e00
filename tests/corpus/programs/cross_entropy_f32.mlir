module @jit_cross_entropy_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<64x100xf32>, %arg1: tensor<64xi32>) -> (tensor<f32> {jax.result_info = "result"}) {
    %0 = call @_one_hot(%arg1) : (tensor<64xi32>) -> tensor<64x100xf32>
    %1 = call @log_softmax(%arg0) : (tensor<64x100xf32>) -> tensor<64x100xf32>
    %2 = stablehlo.multiply %0, %1 : tensor<64x100xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3 = stablehlo.reduce(%2 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<64x100xf32>, tensor<f32>) -> tensor<64xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%3 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<64xf32>, tensor<f32>) -> tensor<f32>
    %cst_1 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %5 = stablehlo.divide %4, %cst_1 : tensor<f32>
    %6 = stablehlo.negate %5 : tensor<f32>
    return %6 : tensor<f32>
  }
  func.func private @_one_hot(%arg0: tensor<64xi32>) -> tensor<64x100xf32> {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<64xi32>) -> tensor<64x1xi32>
    %1 = stablehlo.iota dim = 1 : tensor<1x100xi32>
    %2 = stablehlo.broadcast_in_dim %0, dims = [0, 1] : (tensor<64x1xi32>) -> tensor<64x100xi32>
    %3 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x100xi32>) -> tensor<64x100xi32>
    %4 = stablehlo.compare EQ, %2, %3, SIGNED : (tensor<64x100xi32>, tensor<64x100xi32>) -> tensor<64x100xi1>
    %5 = stablehlo.convert %4 : (tensor<64x100xi1>) -> tensor<64x100xf32>
    return %5 : tensor<64x100xf32>
  }
  func.func private @log_softmax(%arg0: tensor<64x100xf32>) -> tensor<64x100xf32> {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<64x100xf32>, tensor<f32>) -> tensor<64xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %2 = stablehlo.maximum %1, %0 : tensor<64xf32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<64xf32>) -> tensor<64x1xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<64x1xf32>) -> tensor<64x100xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<64x100xf32>
    %6 = stablehlo.exponential %5 : tensor<64x100xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.reduce(%6 init: %cst_1) applies stablehlo.add across dimensions = [1] : (tensor<64x100xf32>, tensor<f32>) -> tensor<64xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0] : (tensor<64xf32>) -> tensor<64x1xf32>
    %9 = stablehlo.log %8 : tensor<64x1xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1] : (tensor<64x1xf32>) -> tensor<64x100xf32>
    %11 = stablehlo.subtract %5, %10 : tensor<64x100xf32>
    return %11 : tensor<64x100xf32>
  }
}

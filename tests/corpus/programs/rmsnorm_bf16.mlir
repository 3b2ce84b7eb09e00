module @jit_rmsnorm_bf16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x32x64xbf16>, %arg1: tensor<64xbf16>) -> (tensor<4x32x64xbf16> {jax.result_info = "result"}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<4x32x64xbf16>
    %1 = stablehlo.convert %0 : (tensor<4x32x64xbf16>) -> tensor<4x32x64xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %cst) applies stablehlo.add across dimensions = [2] : (tensor<4x32x64xf32>, tensor<f32>) -> tensor<4x32xf32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [0, 1] : (tensor<4x32xf32>) -> tensor<4x32x1xf32>
    %cst_0 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x32x1xf32>
    %5 = stablehlo.divide %3, %4 : tensor<4x32x1xf32>
    %6 = stablehlo.convert %5 : (tensor<4x32x1xf32>) -> tensor<4x32x1xbf16>
    %cst_1 = stablehlo.constant dense<9.983770e-07> : tensor<bf16>
    %7 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<bf16>) -> tensor<4x32x1xbf16>
    %8 = stablehlo.add %6, %7 : tensor<4x32x1xbf16>
    %9 = stablehlo.rsqrt %8 : tensor<4x32x1xbf16>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1, 2] : (tensor<4x32x1xbf16>) -> tensor<4x32x64xbf16>
    %11 = stablehlo.multiply %arg0, %10 : tensor<4x32x64xbf16>
    %12 = stablehlo.broadcast_in_dim %arg1, dims = [2] : (tensor<64xbf16>) -> tensor<1x1x64xbf16>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0, 1, 2] : (tensor<1x1x64xbf16>) -> tensor<4x32x64xbf16>
    %14 = stablehlo.multiply %11, %13 : tensor<4x32x64xbf16>
    return %14 : tensor<4x32x64xbf16>
  }
}

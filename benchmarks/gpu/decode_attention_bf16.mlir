module @jit_decode_attention attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x32x1x128xbf16>, %arg1: tensor<4x32x4096x128xbf16>, %arg2: tensor<4x32x4096x128xbf16>) -> (tensor<4x32x1x128xbf16> {jax.result_info = "result"}) {
    %0 = stablehlo.transpose %arg1, dims = [0, 1, 3, 2] : (tensor<4x32x4096x128xbf16>) -> tensor<4x32x128x4096xbf16>
    %1 = stablehlo.dot_general %arg0, %0, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<4x32x1x128xbf16>, tensor<4x32x128x4096xbf16>) -> tensor<4x32x1x4096xbf16>
    %cst = stablehlo.constant dense<1.131250e+01> : tensor<bf16>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<4x32x1x4096xbf16>
    %3 = stablehlo.divide %1, %2 : tensor<4x32x1x4096xbf16>
    %4 = stablehlo.convert %3 : (tensor<4x32x1x4096xbf16>) -> tensor<4x32x1x4096xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %5 = stablehlo.reduce(%4 init: %cst_0) applies stablehlo.maximum across dimensions = [3] : (tensor<4x32x1x4096xf32>, tensor<f32>) -> tensor<4x32x1xf32>
    %cst_1 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<4x32x1xf32>
    %7 = stablehlo.maximum %6, %5 : tensor<4x32x1xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0, 1, 2] : (tensor<4x32x1xf32>) -> tensor<4x32x1x1xf32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1, 2, 3] : (tensor<4x32x1x1xf32>) -> tensor<4x32x1x4096xf32>
    %10 = stablehlo.subtract %4, %9 : tensor<4x32x1x4096xf32>
    %11 = stablehlo.exponential %10 : tensor<4x32x1x4096xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = stablehlo.reduce(%11 init: %cst_2) applies stablehlo.add across dimensions = [3] : (tensor<4x32x1x4096xf32>, tensor<f32>) -> tensor<4x32x1xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0, 1, 2] : (tensor<4x32x1xf32>) -> tensor<4x32x1x1xf32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0, 1, 2, 3] : (tensor<4x32x1x1xf32>) -> tensor<4x32x1x4096xf32>
    %15 = stablehlo.divide %11, %14 : tensor<4x32x1x4096xf32>
    %16 = stablehlo.convert %15 : (tensor<4x32x1x4096xf32>) -> tensor<4x32x1x4096xbf16>
    %17 = stablehlo.dot_general %16, %arg2, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<4x32x1x4096xbf16>, tensor<4x32x4096x128xbf16>) -> tensor<4x32x1x128xbf16>
    return %17 : tensor<4x32x1x128xbf16>
  }
}

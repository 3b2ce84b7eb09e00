module @jit_decode_attention attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1x32x1x128xbf16>, %arg1: tensor<1x32x16384x128xbf16>, %arg2: tensor<1x32x16384x128xbf16>) -> (tensor<1x32x1x128xbf16> {jax.result_info = "result"}) {
    %0 = stablehlo.transpose %arg1, dims = [0, 1, 3, 2] : (tensor<1x32x16384x128xbf16>) -> tensor<1x32x128x16384xbf16>
    %1 = stablehlo.reshape %arg0 : (tensor<1x32x1x128xbf16>) -> tensor<32x1x128xbf16>
    %2 = stablehlo.reshape %0 : (tensor<1x32x128x16384xbf16>) -> tensor<32x128x16384xbf16>
    %3 = stablehlo.dot_general %1, %2, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<32x1x128xbf16>, tensor<32x128x16384xbf16>) -> tensor<32x1x16384xbf16>
    %4 = stablehlo.broadcast_in_dim %3, dims = [1, 2, 3] : (tensor<32x1x16384xbf16>) -> tensor<1x32x1x16384xbf16>
    %cst = stablehlo.constant dense<1.131250e+01> : tensor<bf16>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<1x32x1x16384xbf16>
    %6 = stablehlo.divide %4, %5 : tensor<1x32x1x16384xbf16>
    %7 = stablehlo.convert %6 : (tensor<1x32x1x16384xbf16>) -> tensor<1x32x1x16384xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %8 = stablehlo.reduce(%7 init: %cst_0) applies stablehlo.maximum across dimensions = [3] : (tensor<1x32x1x16384xf32>, tensor<f32>) -> tensor<1x32x1xf32>
    %cst_1 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<1x32x1xf32>
    %10 = stablehlo.maximum %9, %8 : tensor<1x32x1xf32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [0, 1, 2] : (tensor<1x32x1xf32>) -> tensor<1x32x1x1xf32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [0, 1, 2, 3] : (tensor<1x32x1x1xf32>) -> tensor<1x32x1x16384xf32>
    %13 = stablehlo.subtract %7, %12 : tensor<1x32x1x16384xf32>
    %14 = stablehlo.exponential %13 : tensor<1x32x1x16384xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %15 = stablehlo.reduce(%14 init: %cst_2) applies stablehlo.add across dimensions = [3] : (tensor<1x32x1x16384xf32>, tensor<f32>) -> tensor<1x32x1xf32>
    %16 = stablehlo.broadcast_in_dim %15, dims = [0, 1, 2] : (tensor<1x32x1xf32>) -> tensor<1x32x1x1xf32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [0, 1, 2, 3] : (tensor<1x32x1x1xf32>) -> tensor<1x32x1x16384xf32>
    %18 = stablehlo.divide %14, %17 : tensor<1x32x1x16384xf32>
    %19 = stablehlo.convert %18 : (tensor<1x32x1x16384xf32>) -> tensor<1x32x1x16384xbf16>
    %20 = stablehlo.reshape %19 : (tensor<1x32x1x16384xbf16>) -> tensor<32x1x16384xbf16>
    %21 = stablehlo.reshape %arg2 : (tensor<1x32x16384x128xbf16>) -> tensor<32x16384x128xbf16>
    %22 = stablehlo.dot_general %20, %21, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<32x1x16384xbf16>, tensor<32x16384x128xbf16>) -> tensor<32x1x128xbf16>
    %23 = stablehlo.broadcast_in_dim %22, dims = [1, 2, 3] : (tensor<32x1x128xbf16>) -> tensor<1x32x1x128xbf16>
    return %23 : tensor<1x32x1x128xbf16>
  }
}

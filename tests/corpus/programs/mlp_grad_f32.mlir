module @jit_mlp_grad_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<64x64xf32>, %arg1: tensor<64xf32>, %arg2: tensor<64x10xf32>, %arg3: tensor<10xf32>, %arg4: tensor<32x64xf32>, %arg5: tensor<32xi32>) -> (tensor<f32> {jax.result_info = "result[0]"}, tensor<64x64xf32> {jax.result_info = "result[1][0]"}, tensor<64xf32> {jax.result_info = "result[1][1]"}, tensor<64x10xf32> {jax.result_info = "result[1][2]"}, tensor<10xf32> {jax.result_info = "result[1][3]"}) {
    %0 = stablehlo.dot_general %arg4, %arg0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32>
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<64xf32>) -> tensor<1x64xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x64xf32>) -> tensor<32x64xf32>
    %3 = stablehlo.add %0, %2 : tensor<32x64xf32>
    %4 = stablehlo.tanh %3 : tensor<32x64xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %6 = stablehlo.subtract %5, %4 : tensor<32x64xf32>
    %7 = stablehlo.dot_general %4, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x64xf32>, tensor<64x10xf32>) -> tensor<32x10xf32>
    %8 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<10xf32>) -> tensor<1x10xf32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<1x10xf32>) -> tensor<32x10xf32>
    %10 = stablehlo.add %7, %9 : tensor<32x10xf32>
    %11 = call @_one_hot(%arg5) : (tensor<32xi32>) -> tensor<32x10xf32>
    %12:3 = call @log_softmax(%10) : (tensor<32x10xf32>) -> (tensor<32x10xf32>, tensor<32x10xf32>, tensor<32x1xf32>)
    %13 = stablehlo.multiply %11, %12#0 : tensor<32x10xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %14 = stablehlo.reduce(%13 init: %cst_0) applies stablehlo.add across dimensions = [1] : (tensor<32x10xf32>, tensor<f32>) -> tensor<32xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %15 = stablehlo.reduce(%14 init: %cst_1) applies stablehlo.add across dimensions = [0] : (tensor<32xf32>, tensor<f32>) -> tensor<f32>
    %cst_2 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %16 = stablehlo.divide %15, %cst_2 : tensor<f32>
    %17 = stablehlo.negate %16 : tensor<f32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %18 = stablehlo.negate %cst_3 : tensor<f32>
    %cst_4 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %19 = stablehlo.divide %18, %cst_4 : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %19, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %21 = stablehlo.broadcast_in_dim %20, dims = [0] : (tensor<32xf32>) -> tensor<32x10xf32>
    %22 = stablehlo.multiply %11, %21 : tensor<32x10xf32>
    %23 = call @log_softmax_0(%12#1, %12#2, %22) : (tensor<32x10xf32>, tensor<32x1xf32>, tensor<32x10xf32>) -> tensor<32x10xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %24 = stablehlo.reduce(%23 init: %cst_5) applies stablehlo.add across dimensions = [0] : (tensor<32x10xf32>, tensor<f32>) -> tensor<10xf32>
    %25 = stablehlo.reshape %24 : (tensor<10xf32>) -> tensor<1x10xf32>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %26 = stablehlo.reduce(%25 init: %cst_6) applies stablehlo.add across dimensions = [0] : (tensor<1x10xf32>, tensor<f32>) -> tensor<10xf32>
    %27 = stablehlo.dot_general %23, %4, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x10xf32>, tensor<32x64xf32>) -> tensor<10x64xf32>
    %28 = stablehlo.transpose %27, dims = [1, 0] : (tensor<10x64xf32>) -> tensor<64x10xf32>
    %29 = stablehlo.dot_general %23, %arg2, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<32x10xf32>, tensor<64x10xf32>) -> tensor<32x64xf32>
    %30 = stablehlo.multiply %29, %6 : tensor<32x64xf32>
    %31 = stablehlo.multiply %30, %4 : tensor<32x64xf32>
    %32 = stablehlo.add %30, %31 : tensor<32x64xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %33 = stablehlo.reduce(%32 init: %cst_7) applies stablehlo.add across dimensions = [0] : (tensor<32x64xf32>, tensor<f32>) -> tensor<64xf32>
    %34 = stablehlo.reshape %33 : (tensor<64xf32>) -> tensor<1x64xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %35 = stablehlo.reduce(%34 init: %cst_8) applies stablehlo.add across dimensions = [0] : (tensor<1x64xf32>, tensor<f32>) -> tensor<64xf32>
    %36 = stablehlo.dot_general %32, %arg4, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<64x64xf32>
    %37 = stablehlo.transpose %36, dims = [1, 0] : (tensor<64x64xf32>) -> tensor<64x64xf32>
    return %17, %37, %35, %28, %26 : tensor<f32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64x10xf32>, tensor<10xf32>
  }
  func.func private @_one_hot(%arg0: tensor<32xi32>) -> tensor<32x10xf32> {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<32xi32>) -> tensor<32x1xi32>
    %1 = stablehlo.iota dim = 1 : tensor<1x10xi32>
    %2 = stablehlo.broadcast_in_dim %0, dims = [0, 1] : (tensor<32x1xi32>) -> tensor<32x10xi32>
    %3 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x10xi32>) -> tensor<32x10xi32>
    %4 = stablehlo.compare EQ, %2, %3, SIGNED : (tensor<32x10xi32>, tensor<32x10xi32>) -> tensor<32x10xi1>
    %5 = stablehlo.convert %4 : (tensor<32x10xi1>) -> tensor<32x10xf32>
    return %5 : tensor<32x10xf32>
  }
  func.func private @log_softmax(%arg0: tensor<32x10xf32>) -> (tensor<32x10xf32>, tensor<32x10xf32>, tensor<32x1xf32>) {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<32x10xf32>, tensor<f32>) -> tensor<32xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %2 = stablehlo.maximum %1, %0 : tensor<32xf32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<32xf32>) -> tensor<32x1xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<32x1xf32>) -> tensor<32x10xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<32x10xf32>
    %6 = stablehlo.exponential %5 : tensor<32x10xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.reduce(%6 init: %cst_1) applies stablehlo.add across dimensions = [1] : (tensor<32x10xf32>, tensor<f32>) -> tensor<32xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0] : (tensor<32xf32>) -> tensor<32x1xf32>
    %9 = stablehlo.log %8 : tensor<32x1xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1] : (tensor<32x1xf32>) -> tensor<32x10xf32>
    %11 = stablehlo.subtract %5, %10 : tensor<32x10xf32>
    return %11, %6, %8 : tensor<32x10xf32>, tensor<32x10xf32>, tensor<32x1xf32>
  }
  func.func private @log_softmax_0(%arg0: tensor<32x10xf32>, %arg1: tensor<32x1xf32>, %arg2: tensor<32x10xf32>) -> tensor<32x10xf32> {
    %0 = stablehlo.negate %arg2 : tensor<32x10xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<32x10xf32>, tensor<f32>) -> tensor<32xf32>
    %2 = stablehlo.reshape %1 : (tensor<32xf32>) -> tensor<32x1xf32>
    %3 = stablehlo.divide %2, %arg1 : tensor<32x1xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%3 init: %cst_0) applies stablehlo.add across dimensions = [1] : (tensor<32x1xf32>, tensor<f32>) -> tensor<32xf32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<32xf32>) -> tensor<32x10xf32>
    %6 = stablehlo.multiply %5, %arg0 : tensor<32x10xf32>
    %7 = stablehlo.add %arg2, %6 : tensor<32x10xf32>
    return %7 : tensor<32x10xf32>
  }
}

module @jit_var_std_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<64x48xf32>) -> (tensor<48xf32> {jax.result_info = "result['std_first']"}, tensor<64xf32> {jax.result_info = "result['std_last']"}, tensor<48xf32> {jax.result_info = "result['var_first']"}, tensor<64xf32> {jax.result_info = "result['var_last']"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = call @_var(%arg0, %c) : (tensor<64x48xf32>, tensor<i32>) -> tensor<64xf32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = call @_std(%arg0, %c_0) : (tensor<64x48xf32>, tensor<i32>) -> tensor<64xf32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %2 = call @_var_0(%arg0, %c_1) : (tensor<64x48xf32>, tensor<i32>) -> tensor<48xf32>
    %c_2 = stablehlo.constant dense<1> : tensor<i32>
    %3 = call @_std_2(%arg0, %c_2) : (tensor<64x48xf32>, tensor<i32>) -> tensor<48xf32>
    return %3, %1, %2, %0 : tensor<48xf32>, tensor<64xf32>, tensor<48xf32>, tensor<64xf32>
  }
  func.func private @_var(%arg0: tensor<64x48xf32>, %arg1: tensor<i32>) -> tensor<64xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<64x48xf32>, tensor<f32>) -> tensor<64xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<64xf32>) -> tensor<64x1xf32>
    %cst_0 = stablehlo.constant dense<4.800000e+01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<64x1xf32>
    %3 = stablehlo.divide %1, %2 : tensor<64x1xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<64x1xf32>) -> tensor<64x48xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<64x48xf32>
    %6 = chlo.square %5 : tensor<64x48xf32> -> tensor<64x48xf32>
    %7 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %cst_1 = stablehlo.constant dense<4.800000e+01> : tensor<f32>
    %8 = stablehlo.subtract %cst_1, %7 : tensor<f32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %9 = stablehlo.reduce(%6 init: %cst_2) applies stablehlo.add across dimensions = [1] : (tensor<64x48xf32>, tensor<f32>) -> tensor<64xf32>
    %10 = stablehlo.broadcast_in_dim %8, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %11 = stablehlo.divide %9, %10 : tensor<64xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = stablehlo.compare GT, %8, %cst_3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %cst_4 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %13 = call @_where(%12, %11, %cst_4) : (tensor<i1>, tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
    return %13 : tensor<64xf32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<64xf32>, %arg2: tensor<f32>) -> tensor<64xf32> {
    %0 = stablehlo.convert %arg2 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<i1>, tensor<64xf32>
    return %2 : tensor<64xf32>
  }
  func.func private @_std(%arg0: tensor<64x48xf32>, %arg1: tensor<i32>) -> tensor<64xf32> {
    %0 = call @_var(%arg0, %arg1) : (tensor<64x48xf32>, tensor<i32>) -> tensor<64xf32>
    %1 = stablehlo.sqrt %0 : tensor<64xf32>
    return %1 : tensor<64xf32>
  }
  func.func private @_var_0(%arg0: tensor<64x48xf32>, %arg1: tensor<i32>) -> tensor<48xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<64x48xf32>, tensor<f32>) -> tensor<48xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [1] : (tensor<48xf32>) -> tensor<1x48xf32>
    %cst_0 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<1x48xf32>
    %3 = stablehlo.divide %1, %2 : tensor<1x48xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<1x48xf32>) -> tensor<64x48xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<64x48xf32>
    %6 = chlo.square %5 : tensor<64x48xf32> -> tensor<64x48xf32>
    %7 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %cst_1 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %8 = stablehlo.subtract %cst_1, %7 : tensor<f32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %9 = stablehlo.reduce(%6 init: %cst_2) applies stablehlo.add across dimensions = [0] : (tensor<64x48xf32>, tensor<f32>) -> tensor<48xf32>
    %10 = stablehlo.broadcast_in_dim %8, dims = [] : (tensor<f32>) -> tensor<48xf32>
    %11 = stablehlo.divide %9, %10 : tensor<48xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = stablehlo.compare GT, %8, %cst_3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %cst_4 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %13 = call @_where_1(%12, %11, %cst_4) : (tensor<i1>, tensor<48xf32>, tensor<f32>) -> tensor<48xf32>
    return %13 : tensor<48xf32>
  }
  func.func private @_where_1(%arg0: tensor<i1>, %arg1: tensor<48xf32>, %arg2: tensor<f32>) -> tensor<48xf32> {
    %0 = stablehlo.convert %arg2 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<48xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<i1>, tensor<48xf32>
    return %2 : tensor<48xf32>
  }
  func.func private @_std_2(%arg0: tensor<64x48xf32>, %arg1: tensor<i32>) -> tensor<48xf32> {
    %0 = call @_var_0(%arg0, %arg1) : (tensor<64x48xf32>, tensor<i32>) -> tensor<48xf32>
    %1 = stablehlo.sqrt %0 : tensor<48xf32>
    return %1 : tensor<48xf32>
  }
}

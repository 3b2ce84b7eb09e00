module @jit_adam_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<64x64xf32>, %arg2: tensor<64xf32>, %arg3: tensor<64x32xf32>, %arg4: tensor<64x64xf32>, %arg5: tensor<64xf32>, %arg6: tensor<64x32xf32>, %arg7: tensor<64x64xf32>, %arg8: tensor<64xf32>, %arg9: tensor<64x32xf32>, %arg10: tensor<64x64xf32>, %arg11: tensor<64xf32>, %arg12: tensor<64x32xf32>) -> (tensor<64x64xf32> {jax.result_info = "result[0][0]"}, tensor<64xf32> {jax.result_info = "result[0][1]"}, tensor<64x32xf32> {jax.result_info = "result[0][2]"}, tensor<64x64xf32> {jax.result_info = "result[1][0]"}, tensor<64xf32> {jax.result_info = "result[1][1]"}, tensor<64x32xf32> {jax.result_info = "result[1][2]"}, tensor<64x64xf32> {jax.result_info = "result[2][0]"}, tensor<64xf32> {jax.result_info = "result[2][1]"}, tensor<64x32xf32> {jax.result_info = "result[2][2]"}) {
    %0 = stablehlo.convert %arg0 : (tensor<i32>) -> tensor<f32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %1 = stablehlo.add %0, %cst : tensor<f32>
    %cst_0 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %3 = stablehlo.multiply %2, %arg7 : tensor<64x64xf32>
    %cst_1 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %5 = stablehlo.multiply %4, %arg4 : tensor<64x64xf32>
    %6 = stablehlo.add %3, %5 : tensor<64x64xf32>
    %cst_2 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %8 = stablehlo.multiply %7, %arg10 : tensor<64x64xf32>
    %cst_3 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %10 = stablehlo.multiply %9, %arg4 : tensor<64x64xf32>
    %11 = stablehlo.multiply %10, %arg4 : tensor<64x64xf32>
    %12 = stablehlo.add %8, %11 : tensor<64x64xf32>
    %cst_4 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %13 = stablehlo.power %cst_4, %1 : tensor<f32>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %14 = stablehlo.subtract %cst_5, %13 : tensor<f32>
    %15 = stablehlo.broadcast_in_dim %14, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %16 = stablehlo.divide %6, %15 : tensor<64x64xf32>
    %cst_6 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %17 = stablehlo.power %cst_6, %1 : tensor<f32>
    %cst_7 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %18 = stablehlo.subtract %cst_7, %17 : tensor<f32>
    %19 = stablehlo.broadcast_in_dim %18, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %20 = stablehlo.divide %12, %19 : tensor<64x64xf32>
    %cst_8 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %22 = stablehlo.multiply %21, %16 : tensor<64x64xf32>
    %23 = stablehlo.sqrt %20 : tensor<64x64xf32>
    %cst_9 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %24 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %25 = stablehlo.add %23, %24 : tensor<64x64xf32>
    %26 = stablehlo.divide %22, %25 : tensor<64x64xf32>
    %27 = stablehlo.subtract %arg1, %26 : tensor<64x64xf32>
    %cst_10 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %28 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %29 = stablehlo.multiply %28, %arg8 : tensor<64xf32>
    %cst_11 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %30 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %31 = stablehlo.multiply %30, %arg5 : tensor<64xf32>
    %32 = stablehlo.add %29, %31 : tensor<64xf32>
    %cst_12 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %33 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %34 = stablehlo.multiply %33, %arg11 : tensor<64xf32>
    %cst_13 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %35 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %36 = stablehlo.multiply %35, %arg5 : tensor<64xf32>
    %37 = stablehlo.multiply %36, %arg5 : tensor<64xf32>
    %38 = stablehlo.add %34, %37 : tensor<64xf32>
    %cst_14 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %39 = stablehlo.power %cst_14, %1 : tensor<f32>
    %cst_15 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %40 = stablehlo.subtract %cst_15, %39 : tensor<f32>
    %41 = stablehlo.broadcast_in_dim %40, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %42 = stablehlo.divide %32, %41 : tensor<64xf32>
    %cst_16 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %43 = stablehlo.power %cst_16, %1 : tensor<f32>
    %cst_17 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %44 = stablehlo.subtract %cst_17, %43 : tensor<f32>
    %45 = stablehlo.broadcast_in_dim %44, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %46 = stablehlo.divide %38, %45 : tensor<64xf32>
    %cst_18 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %47 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %48 = stablehlo.multiply %47, %42 : tensor<64xf32>
    %49 = stablehlo.sqrt %46 : tensor<64xf32>
    %cst_19 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %50 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %51 = stablehlo.add %49, %50 : tensor<64xf32>
    %52 = stablehlo.divide %48, %51 : tensor<64xf32>
    %53 = stablehlo.subtract %arg2, %52 : tensor<64xf32>
    %cst_20 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %54 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %55 = stablehlo.multiply %54, %arg9 : tensor<64x32xf32>
    %cst_21 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %56 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %57 = stablehlo.multiply %56, %arg6 : tensor<64x32xf32>
    %58 = stablehlo.add %55, %57 : tensor<64x32xf32>
    %cst_22 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %59 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %60 = stablehlo.multiply %59, %arg12 : tensor<64x32xf32>
    %cst_23 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %61 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %62 = stablehlo.multiply %61, %arg6 : tensor<64x32xf32>
    %63 = stablehlo.multiply %62, %arg6 : tensor<64x32xf32>
    %64 = stablehlo.add %60, %63 : tensor<64x32xf32>
    %cst_24 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %65 = stablehlo.power %cst_24, %1 : tensor<f32>
    %cst_25 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %66 = stablehlo.subtract %cst_25, %65 : tensor<f32>
    %67 = stablehlo.broadcast_in_dim %66, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %68 = stablehlo.divide %58, %67 : tensor<64x32xf32>
    %cst_26 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %69 = stablehlo.power %cst_26, %1 : tensor<f32>
    %cst_27 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %70 = stablehlo.subtract %cst_27, %69 : tensor<f32>
    %71 = stablehlo.broadcast_in_dim %70, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %72 = stablehlo.divide %64, %71 : tensor<64x32xf32>
    %cst_28 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %73 = stablehlo.broadcast_in_dim %cst_28, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %74 = stablehlo.multiply %73, %68 : tensor<64x32xf32>
    %75 = stablehlo.sqrt %72 : tensor<64x32xf32>
    %cst_29 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %76 = stablehlo.broadcast_in_dim %cst_29, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %77 = stablehlo.add %75, %76 : tensor<64x32xf32>
    %78 = stablehlo.divide %74, %77 : tensor<64x32xf32>
    %79 = stablehlo.subtract %arg3, %78 : tensor<64x32xf32>
    return %27, %53, %79, %6, %32, %58, %12, %38, %64 : tensor<64x64xf32>, tensor<64xf32>, tensor<64x32xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64x32xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64x32xf32>
  }
}

module @jit_gpt2_block_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x16x32xf32>, %arg1: tensor<32xf32>, %arg2: tensor<32xf32>, %arg3: tensor<32x96xf32>, %arg4: tensor<96xf32>, %arg5: tensor<32x32xf32>, %arg6: tensor<32xf32>, %arg7: tensor<32xf32>, %arg8: tensor<32xf32>, %arg9: tensor<32x128xf32>, %arg10: tensor<128xf32>, %arg11: tensor<128x32xf32>, %arg12: tensor<32xf32>) -> (tensor<2x16x32xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %cst_0 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %3 = stablehlo.divide %1, %2 : tensor<2x16x1xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %4 = call @_var(%arg0, %c) : (tensor<2x16x32xf32>, tensor<i32>) -> tensor<2x16x1xf32>
    %5 = stablehlo.broadcast_in_dim %3, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %6 = stablehlo.subtract %arg0, %5 : tensor<2x16x32xf32>
    %cst_1 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %8 = stablehlo.add %4, %7 : tensor<2x16x1xf32>
    %9 = stablehlo.rsqrt %8 : tensor<2x16x1xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %11 = stablehlo.multiply %6, %10 : tensor<2x16x32xf32>
    %12 = stablehlo.broadcast_in_dim %arg1, dims = [2] : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %14 = stablehlo.multiply %11, %13 : tensor<2x16x32xf32>
    %15 = stablehlo.broadcast_in_dim %arg2, dims = [2] : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %16 = stablehlo.broadcast_in_dim %15, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %17 = stablehlo.add %14, %16 : tensor<2x16x32xf32>
    %18 = stablehlo.dot_general %17, %arg3, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
    %19 = stablehlo.broadcast_in_dim %arg4, dims = [2] : (tensor<96xf32>) -> tensor<1x1x96xf32>
    %20 = stablehlo.broadcast_in_dim %19, dims = [0, 1, 2] : (tensor<1x1x96xf32>) -> tensor<2x16x96xf32>
    %21 = stablehlo.add %18, %20 : tensor<2x16x96xf32>
    %22 = stablehlo.slice %21 [0:2, 0:16, 0:32] : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
    %23 = stablehlo.slice %21 [0:2, 0:16, 32:64] : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
    %24 = stablehlo.slice %21 [0:2, 0:16, 64:96] : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
    %25 = stablehlo.reshape %22 : (tensor<2x16x32xf32>) -> tensor<2x16x2x16xf32>
    %26 = stablehlo.transpose %25, dims = [0, 2, 1, 3] : (tensor<2x16x2x16xf32>) -> tensor<2x2x16x16xf32>
    %27 = stablehlo.reshape %23 : (tensor<2x16x32xf32>) -> tensor<2x16x2x16xf32>
    %28 = stablehlo.transpose %27, dims = [0, 2, 1, 3] : (tensor<2x16x2x16xf32>) -> tensor<2x2x16x16xf32>
    %29 = stablehlo.reshape %24 : (tensor<2x16x32xf32>) -> tensor<2x16x2x16xf32>
    %30 = stablehlo.transpose %29, dims = [0, 2, 1, 3] : (tensor<2x16x2x16xf32>) -> tensor<2x2x16x16xf32>
    %31 = stablehlo.dot_general %26, %28, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3], precision = [DEFAULT, DEFAULT] : (tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>) -> tensor<2x2x16x16xf32>
    %cst_2 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %32 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x2x16x16xf32>
    %33 = stablehlo.divide %31, %32 : tensor<2x2x16x16xf32>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %34 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i1>) -> tensor<16x16xi1>
    %35 = call @tril(%34) : (tensor<16x16xi1>) -> tensor<16x16xi1>
    %cst_4 = stablehlo.constant dense<-3.40282347E+38> : tensor<f32>
    %36 = call @_where_0(%35, %33, %cst_4) : (tensor<16x16xi1>, tensor<2x2x16x16xf32>, tensor<f32>) -> tensor<2x2x16x16xf32>
    %cst_5 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %37 = stablehlo.reduce(%36 init: %cst_5) applies stablehlo.maximum across dimensions = [3] : (tensor<2x2x16x16xf32>, tensor<f32>) -> tensor<2x2x16xf32>
    %cst_6 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %38 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<2x2x16xf32>
    %39 = stablehlo.maximum %38, %37 : tensor<2x2x16xf32>
    %40 = stablehlo.broadcast_in_dim %39, dims = [0, 1, 2] : (tensor<2x2x16xf32>) -> tensor<2x2x16x1xf32>
    %41 = stablehlo.broadcast_in_dim %40, dims = [0, 1, 2, 3] : (tensor<2x2x16x1xf32>) -> tensor<2x2x16x16xf32>
    %42 = stablehlo.subtract %36, %41 : tensor<2x2x16x16xf32>
    %43 = stablehlo.exponential %42 : tensor<2x2x16x16xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %44 = stablehlo.reduce(%43 init: %cst_7) applies stablehlo.add across dimensions = [3] : (tensor<2x2x16x16xf32>, tensor<f32>) -> tensor<2x2x16xf32>
    %45 = stablehlo.broadcast_in_dim %44, dims = [0, 1, 2] : (tensor<2x2x16xf32>) -> tensor<2x2x16x1xf32>
    %46 = stablehlo.broadcast_in_dim %45, dims = [0, 1, 2, 3] : (tensor<2x2x16x1xf32>) -> tensor<2x2x16x16xf32>
    %47 = stablehlo.divide %43, %46 : tensor<2x2x16x16xf32>
    %48 = stablehlo.dot_general %47, %30, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>) -> tensor<2x2x16x16xf32>
    %49 = stablehlo.transpose %48, dims = [0, 2, 1, 3] : (tensor<2x2x16x16xf32>) -> tensor<2x16x2x16xf32>
    %50 = stablehlo.reshape %49 : (tensor<2x16x2x16xf32>) -> tensor<2x16x32xf32>
    %51 = stablehlo.dot_general %50, %arg5, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %52 = stablehlo.add %arg0, %51 : tensor<2x16x32xf32>
    %53 = stablehlo.broadcast_in_dim %arg6, dims = [2] : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %54 = stablehlo.broadcast_in_dim %53, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %55 = stablehlo.add %52, %54 : tensor<2x16x32xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %56 = stablehlo.reduce(%55 init: %cst_8) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %57 = stablehlo.broadcast_in_dim %56, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %cst_9 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %58 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %59 = stablehlo.divide %57, %58 : tensor<2x16x1xf32>
    %c_10 = stablehlo.constant dense<0> : tensor<i32>
    %60 = call @_var(%55, %c_10) : (tensor<2x16x32xf32>, tensor<i32>) -> tensor<2x16x1xf32>
    %61 = stablehlo.broadcast_in_dim %59, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %62 = stablehlo.subtract %55, %61 : tensor<2x16x32xf32>
    %cst_11 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %63 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %64 = stablehlo.add %60, %63 : tensor<2x16x1xf32>
    %65 = stablehlo.rsqrt %64 : tensor<2x16x1xf32>
    %66 = stablehlo.broadcast_in_dim %65, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %67 = stablehlo.multiply %62, %66 : tensor<2x16x32xf32>
    %68 = stablehlo.broadcast_in_dim %arg7, dims = [2] : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %69 = stablehlo.broadcast_in_dim %68, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %70 = stablehlo.multiply %67, %69 : tensor<2x16x32xf32>
    %71 = stablehlo.broadcast_in_dim %arg8, dims = [2] : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %72 = stablehlo.broadcast_in_dim %71, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %73 = stablehlo.add %70, %72 : tensor<2x16x32xf32>
    %74 = stablehlo.dot_general %73, %arg9, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x32xf32>, tensor<32x128xf32>) -> tensor<2x16x128xf32>
    %75 = stablehlo.broadcast_in_dim %arg10, dims = [2] : (tensor<128xf32>) -> tensor<1x1x128xf32>
    %76 = stablehlo.broadcast_in_dim %75, dims = [0, 1, 2] : (tensor<1x1x128xf32>) -> tensor<2x16x128xf32>
    %77 = stablehlo.add %74, %76 : tensor<2x16x128xf32>
    %78 = stablehlo.multiply %77, %77 : tensor<2x16x128xf32>
    %79 = stablehlo.multiply %78, %77 : tensor<2x16x128xf32>
    %cst_12 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %80 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<2x16x128xf32>
    %81 = stablehlo.multiply %80, %79 : tensor<2x16x128xf32>
    %82 = stablehlo.add %77, %81 : tensor<2x16x128xf32>
    %cst_13 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %83 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<2x16x128xf32>
    %84 = stablehlo.multiply %83, %82 : tensor<2x16x128xf32>
    %85 = stablehlo.tanh %84 : tensor<2x16x128xf32>
    %cst_14 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %86 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<2x16x128xf32>
    %87 = stablehlo.add %86, %85 : tensor<2x16x128xf32>
    %cst_15 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %88 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<2x16x128xf32>
    %89 = stablehlo.multiply %88, %87 : tensor<2x16x128xf32>
    %90 = stablehlo.multiply %77, %89 : tensor<2x16x128xf32>
    %91 = stablehlo.dot_general %90, %arg11, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x128xf32>, tensor<128x32xf32>) -> tensor<2x16x32xf32>
    %92 = stablehlo.broadcast_in_dim %arg12, dims = [2] : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %93 = stablehlo.broadcast_in_dim %92, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %94 = stablehlo.add %91, %93 : tensor<2x16x32xf32>
    %95 = stablehlo.add %55, %94 : tensor<2x16x32xf32>
    return %95 : tensor<2x16x32xf32>
  }
  func.func private @_var(%arg0: tensor<2x16x32xf32>, %arg1: tensor<i32>) -> tensor<2x16x1xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %cst_0 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %3 = stablehlo.divide %1, %2 : tensor<2x16x1xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<2x16x32xf32>
    %6 = chlo.square %5 : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
    %7 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %cst_1 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %8 = stablehlo.subtract %cst_1, %7 : tensor<f32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %9 = stablehlo.reduce(%6 init: %cst_2) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %11 = stablehlo.broadcast_in_dim %8, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %12 = stablehlo.divide %10, %11 : tensor<2x16x1xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %13 = stablehlo.compare GT, %8, %cst_3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %cst_4 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %14 = call @_where(%13, %12, %cst_4) : (tensor<i1>, tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
    return %14 : tensor<2x16x1xf32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<2x16x1xf32>, %arg2: tensor<f32>) -> tensor<2x16x1xf32> {
    %0 = stablehlo.convert %arg2 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<i1>, tensor<2x16x1xf32>
    return %2 : tensor<2x16x1xf32>
  }
  func.func private @tril(%arg0: tensor<16x16xi1>) -> tensor<16x16xi1> {
    %0 = stablehlo.iota dim = 0 : tensor<16x16xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<16x16xi32>
    %2 = stablehlo.add %0, %1 : tensor<16x16xi32>
    %3 = stablehlo.iota dim = 1 : tensor<16x16xi32>
    %4 = stablehlo.compare GE, %2, %3, SIGNED : (tensor<16x16xi32>, tensor<16x16xi32>) -> tensor<16x16xi1>
    %c_0 = stablehlo.constant dense<false> : tensor<i1>
    %5 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i1>) -> tensor<16x16xi1>
    %6 = stablehlo.select %4, %arg0, %5 : tensor<16x16xi1>, tensor<16x16xi1>
    return %6 : tensor<16x16xi1>
  }
  func.func private @_where_0(%arg0: tensor<16x16xi1>, %arg1: tensor<2x2x16x16xf32>, %arg2: tensor<f32>) -> tensor<2x2x16x16xf32> {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [2, 3] : (tensor<16x16xi1>) -> tensor<2x2x16x16xi1>
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<2x2x16x16xf32>
    %2 = stablehlo.select %0, %arg1, %1 : tensor<2x2x16x16xi1>, tensor<2x2x16x16xf32>
    return %2 : tensor<2x2x16x16xf32>
  }
}

module @jit_llama_block_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x16x32xf32>, %arg1: tensor<32xf32>, %arg2: tensor<32x32xf32>, %arg3: tensor<32x32xf32>, %arg4: tensor<32x32xf32>, %arg5: tensor<32x32xf32>, %arg6: tensor<32xf32>, %arg7: tensor<32x96xf32>, %arg8: tensor<32x96xf32>, %arg9: tensor<96x32xf32>) -> (tensor<2x16x32xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<2x16x32xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %cst_0 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %4 = stablehlo.divide %2, %3 : tensor<2x16x1xf32>
    %cst_1 = stablehlo.constant dense<9.99999997E-7> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %6 = stablehlo.add %4, %5 : tensor<2x16x1xf32>
    %7 = stablehlo.rsqrt %6 : tensor<2x16x1xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %9 = stablehlo.multiply %arg0, %8 : tensor<2x16x32xf32>
    %10 = stablehlo.broadcast_in_dim %arg1, dims = [2] : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %12 = stablehlo.multiply %9, %11 : tensor<2x16x32xf32>
    %13 = stablehlo.dot_general %12, %arg2, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %14 = stablehlo.reshape %13 : (tensor<2x16x32xf32>) -> tensor<2x16x2x16xf32>
    %15 = stablehlo.transpose %14, dims = [0, 2, 1, 3] : (tensor<2x16x2x16xf32>) -> tensor<2x2x16x16xf32>
    %16 = stablehlo.dot_general %12, %arg3, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %17 = stablehlo.reshape %16 : (tensor<2x16x32xf32>) -> tensor<2x16x2x16xf32>
    %18 = stablehlo.transpose %17, dims = [0, 2, 1, 3] : (tensor<2x16x2x16xf32>) -> tensor<2x2x16x16xf32>
    %19 = stablehlo.dot_general %12, %arg4, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %20 = stablehlo.reshape %19 : (tensor<2x16x32xf32>) -> tensor<2x16x2x16xf32>
    %21 = stablehlo.transpose %20, dims = [0, 2, 1, 3] : (tensor<2x16x2x16xf32>) -> tensor<2x2x16x16xf32>
    %22 = stablehlo.iota dim = 0 : tensor<8xf32>
    %cst_2 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %24 = stablehlo.multiply %23, %22 : tensor<8xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %26 = stablehlo.add %25, %24 : tensor<8xf32>
    %cst_4 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %27 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %28 = stablehlo.divide %26, %27 : tensor<8xf32>
    %cst_5 = stablehlo.constant dense<1.000000e+04> : tensor<f32>
    %29 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %30 = stablehlo.power %29, %28 : tensor<8xf32>
    %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %31 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %32 = stablehlo.divide %31, %30 : tensor<8xf32>
    %33 = stablehlo.iota dim = 0 : tensor<16xf32>
    %34 = stablehlo.broadcast_in_dim %33, dims = [0] : (tensor<16xf32>) -> tensor<16x1xf32>
    %35 = stablehlo.broadcast_in_dim %32, dims = [1] : (tensor<8xf32>) -> tensor<1x8xf32>
    %36 = stablehlo.broadcast_in_dim %34, dims = [0, 1] : (tensor<16x1xf32>) -> tensor<16x8xf32>
    %37 = stablehlo.broadcast_in_dim %35, dims = [0, 1] : (tensor<1x8xf32>) -> tensor<16x8xf32>
    %38 = stablehlo.multiply %36, %37 : tensor<16x8xf32>
    %39 = stablehlo.sine %38 : tensor<16x8xf32>
    %40 = stablehlo.concatenate %39, %39, dim = 1 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
    %41 = stablehlo.cosine %38 : tensor<16x8xf32>
    %42 = stablehlo.concatenate %41, %41, dim = 1 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
    %43 = stablehlo.slice %15 [0:2, 0:2, 0:16, 0:8] : (tensor<2x2x16x16xf32>) -> tensor<2x2x16x8xf32>
    %44 = stablehlo.slice %15 [0:2, 0:2, 0:16, 8:16] : (tensor<2x2x16x16xf32>) -> tensor<2x2x16x8xf32>
    %45 = stablehlo.broadcast_in_dim %42, dims = [2, 3] : (tensor<16x16xf32>) -> tensor<1x1x16x16xf32>
    %46 = stablehlo.broadcast_in_dim %45, dims = [0, 1, 2, 3] : (tensor<1x1x16x16xf32>) -> tensor<2x2x16x16xf32>
    %47 = stablehlo.multiply %15, %46 : tensor<2x2x16x16xf32>
    %48 = stablehlo.negate %44 : tensor<2x2x16x8xf32>
    %49 = stablehlo.concatenate %48, %43, dim = 3 : (tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x2x16x16xf32>
    %50 = stablehlo.broadcast_in_dim %40, dims = [2, 3] : (tensor<16x16xf32>) -> tensor<1x1x16x16xf32>
    %51 = stablehlo.broadcast_in_dim %50, dims = [0, 1, 2, 3] : (tensor<1x1x16x16xf32>) -> tensor<2x2x16x16xf32>
    %52 = stablehlo.multiply %49, %51 : tensor<2x2x16x16xf32>
    %53 = stablehlo.add %47, %52 : tensor<2x2x16x16xf32>
    %54 = stablehlo.iota dim = 0 : tensor<8xf32>
    %cst_7 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %55 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %56 = stablehlo.multiply %55, %54 : tensor<8xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %57 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %58 = stablehlo.add %57, %56 : tensor<8xf32>
    %cst_9 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %59 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %60 = stablehlo.divide %58, %59 : tensor<8xf32>
    %cst_10 = stablehlo.constant dense<1.000000e+04> : tensor<f32>
    %61 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %62 = stablehlo.power %61, %60 : tensor<8xf32>
    %cst_11 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %63 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %64 = stablehlo.divide %63, %62 : tensor<8xf32>
    %65 = stablehlo.iota dim = 0 : tensor<16xf32>
    %66 = stablehlo.broadcast_in_dim %65, dims = [0] : (tensor<16xf32>) -> tensor<16x1xf32>
    %67 = stablehlo.broadcast_in_dim %64, dims = [1] : (tensor<8xf32>) -> tensor<1x8xf32>
    %68 = stablehlo.broadcast_in_dim %66, dims = [0, 1] : (tensor<16x1xf32>) -> tensor<16x8xf32>
    %69 = stablehlo.broadcast_in_dim %67, dims = [0, 1] : (tensor<1x8xf32>) -> tensor<16x8xf32>
    %70 = stablehlo.multiply %68, %69 : tensor<16x8xf32>
    %71 = stablehlo.sine %70 : tensor<16x8xf32>
    %72 = stablehlo.concatenate %71, %71, dim = 1 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
    %73 = stablehlo.cosine %70 : tensor<16x8xf32>
    %74 = stablehlo.concatenate %73, %73, dim = 1 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
    %75 = stablehlo.slice %18 [0:2, 0:2, 0:16, 0:8] : (tensor<2x2x16x16xf32>) -> tensor<2x2x16x8xf32>
    %76 = stablehlo.slice %18 [0:2, 0:2, 0:16, 8:16] : (tensor<2x2x16x16xf32>) -> tensor<2x2x16x8xf32>
    %77 = stablehlo.broadcast_in_dim %74, dims = [2, 3] : (tensor<16x16xf32>) -> tensor<1x1x16x16xf32>
    %78 = stablehlo.broadcast_in_dim %77, dims = [0, 1, 2, 3] : (tensor<1x1x16x16xf32>) -> tensor<2x2x16x16xf32>
    %79 = stablehlo.multiply %18, %78 : tensor<2x2x16x16xf32>
    %80 = stablehlo.negate %76 : tensor<2x2x16x8xf32>
    %81 = stablehlo.concatenate %80, %75, dim = 3 : (tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x2x16x16xf32>
    %82 = stablehlo.broadcast_in_dim %72, dims = [2, 3] : (tensor<16x16xf32>) -> tensor<1x1x16x16xf32>
    %83 = stablehlo.broadcast_in_dim %82, dims = [0, 1, 2, 3] : (tensor<1x1x16x16xf32>) -> tensor<2x2x16x16xf32>
    %84 = stablehlo.multiply %81, %83 : tensor<2x2x16x16xf32>
    %85 = stablehlo.add %79, %84 : tensor<2x2x16x16xf32>
    %86 = stablehlo.dot_general %53, %85, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3], precision = [DEFAULT, DEFAULT] : (tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>) -> tensor<2x2x16x16xf32>
    %cst_12 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %87 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<2x2x16x16xf32>
    %88 = stablehlo.divide %86, %87 : tensor<2x2x16x16xf32>
    %c = stablehlo.constant dense<true> : tensor<i1>
    %89 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<16x16xi1>
    %90 = call @tril(%89) : (tensor<16x16xi1>) -> tensor<16x16xi1>
    %cst_13 = stablehlo.constant dense<-3.40282347E+38> : tensor<f32>
    %91 = call @_where(%90, %88, %cst_13) : (tensor<16x16xi1>, tensor<2x2x16x16xf32>, tensor<f32>) -> tensor<2x2x16x16xf32>
    %cst_14 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %92 = stablehlo.reduce(%91 init: %cst_14) applies stablehlo.maximum across dimensions = [3] : (tensor<2x2x16x16xf32>, tensor<f32>) -> tensor<2x2x16xf32>
    %cst_15 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %93 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<2x2x16xf32>
    %94 = stablehlo.maximum %93, %92 : tensor<2x2x16xf32>
    %95 = stablehlo.broadcast_in_dim %94, dims = [0, 1, 2] : (tensor<2x2x16xf32>) -> tensor<2x2x16x1xf32>
    %96 = stablehlo.broadcast_in_dim %95, dims = [0, 1, 2, 3] : (tensor<2x2x16x1xf32>) -> tensor<2x2x16x16xf32>
    %97 = stablehlo.subtract %91, %96 : tensor<2x2x16x16xf32>
    %98 = stablehlo.exponential %97 : tensor<2x2x16x16xf32>
    %cst_16 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %99 = stablehlo.reduce(%98 init: %cst_16) applies stablehlo.add across dimensions = [3] : (tensor<2x2x16x16xf32>, tensor<f32>) -> tensor<2x2x16xf32>
    %100 = stablehlo.broadcast_in_dim %99, dims = [0, 1, 2] : (tensor<2x2x16xf32>) -> tensor<2x2x16x1xf32>
    %101 = stablehlo.broadcast_in_dim %100, dims = [0, 1, 2, 3] : (tensor<2x2x16x1xf32>) -> tensor<2x2x16x16xf32>
    %102 = stablehlo.divide %98, %101 : tensor<2x2x16x16xf32>
    %103 = stablehlo.dot_general %102, %21, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>) -> tensor<2x2x16x16xf32>
    %104 = stablehlo.transpose %103, dims = [0, 2, 1, 3] : (tensor<2x2x16x16xf32>) -> tensor<2x16x2x16xf32>
    %105 = stablehlo.reshape %104 : (tensor<2x16x2x16xf32>) -> tensor<2x16x32xf32>
    %106 = stablehlo.dot_general %105, %arg5, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %107 = stablehlo.add %arg0, %106 : tensor<2x16x32xf32>
    %108 = stablehlo.multiply %107, %107 : tensor<2x16x32xf32>
    %cst_17 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %109 = stablehlo.reduce(%108 init: %cst_17) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %110 = stablehlo.broadcast_in_dim %109, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %cst_18 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %111 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %112 = stablehlo.divide %110, %111 : tensor<2x16x1xf32>
    %cst_19 = stablehlo.constant dense<9.99999997E-7> : tensor<f32>
    %113 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %114 = stablehlo.add %112, %113 : tensor<2x16x1xf32>
    %115 = stablehlo.rsqrt %114 : tensor<2x16x1xf32>
    %116 = stablehlo.broadcast_in_dim %115, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %117 = stablehlo.multiply %107, %116 : tensor<2x16x32xf32>
    %118 = stablehlo.broadcast_in_dim %arg6, dims = [2] : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %119 = stablehlo.broadcast_in_dim %118, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %120 = stablehlo.multiply %117, %119 : tensor<2x16x32xf32>
    %121 = stablehlo.dot_general %120, %arg7, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
    %122 = call @silu(%121) : (tensor<2x16x96xf32>) -> tensor<2x16x96xf32>
    %123 = stablehlo.dot_general %120, %arg8, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
    %124 = stablehlo.multiply %122, %123 : tensor<2x16x96xf32>
    %125 = stablehlo.dot_general %124, %arg9, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16x96xf32>, tensor<96x32xf32>) -> tensor<2x16x32xf32>
    %126 = stablehlo.add %107, %125 : tensor<2x16x32xf32>
    return %126 : tensor<2x16x32xf32>
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
  func.func private @_where(%arg0: tensor<16x16xi1>, %arg1: tensor<2x2x16x16xf32>, %arg2: tensor<f32>) -> tensor<2x2x16x16xf32> {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [2, 3] : (tensor<16x16xi1>) -> tensor<2x2x16x16xi1>
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<2x2x16x16xf32>
    %2 = stablehlo.select %0, %arg1, %1 : tensor<2x2x16x16xi1>, tensor<2x2x16x16xf32>
    return %2 : tensor<2x2x16x16xf32>
  }
  func.func private @silu(%arg0: tensor<2x16x96xf32>) -> tensor<2x16x96xf32> {
    %0 = stablehlo.negate %arg0 : tensor<2x16x96xf32>
    %1 = stablehlo.exponential %0 : tensor<2x16x96xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x16x96xf32>
    %3 = stablehlo.add %2, %1 : tensor<2x16x96xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x16x96xf32>
    %5 = stablehlo.divide %4, %3 : tensor<2x16x96xf32>
    %6 = stablehlo.multiply %arg0, %5 : tensor<2x16x96xf32>
    return %6 : tensor<2x16x96xf32>
  }
}

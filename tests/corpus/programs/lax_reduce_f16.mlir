module @jit_lax_reduce_f16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x16x24xf16>, %arg1: tensor<8x16x24xf16>) -> (tensor<16x24xf16> {jax.result_info = "result['max0']"}, tensor<8x24xf16> {jax.result_info = "result['max1']"}, tensor<8xf16> {jax.result_info = "result['max12']"}, tensor<8x16xf16> {jax.result_info = "result['max2']"}, tensor<16x24xf16> {jax.result_info = "result['min0']"}, tensor<8x24xf16> {jax.result_info = "result['min1']"}, tensor<8x16xf16> {jax.result_info = "result['min2']"}, tensor<16x24xf16> {jax.result_info = "result['prod0']"}, tensor<8x24xf16> {jax.result_info = "result['prod1']"}, tensor<8x16xf16> {jax.result_info = "result['prod2']"}, tensor<16x24xf16> {jax.result_info = "result['sum0']"}, tensor<24xf16> {jax.result_info = "result['sum01']"}, tensor<8x24xf16> {jax.result_info = "result['sum1']"}, tensor<8x16xf16> {jax.result_info = "result['sum2']"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f16>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<16x24xf16>
    %cst_0 = stablehlo.constant dense<0xFC00> : tensor<f16>
    %1 = stablehlo.reduce(%arg0 init: %cst_0) applies stablehlo.maximum across dimensions = [0] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<16x24xf16>
    %cst_1 = stablehlo.constant dense<0x7C00> : tensor<f16>
    %2 = stablehlo.reduce(%arg0 init: %cst_1) applies stablehlo.minimum across dimensions = [0] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<16x24xf16>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f16>
    %3 = stablehlo.reduce(%arg1 init: %cst_2) applies stablehlo.multiply across dimensions = [0] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<16x24xf16>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f16>
    %4 = stablehlo.reduce(%arg0 init: %cst_3) applies stablehlo.add across dimensions = [1] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<8x24xf16>
    %cst_4 = stablehlo.constant dense<0xFC00> : tensor<f16>
    %5 = stablehlo.reduce(%arg0 init: %cst_4) applies stablehlo.maximum across dimensions = [1] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<8x24xf16>
    %cst_5 = stablehlo.constant dense<0x7C00> : tensor<f16>
    %6 = stablehlo.reduce(%arg0 init: %cst_5) applies stablehlo.minimum across dimensions = [1] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<8x24xf16>
    %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f16>
    %7 = stablehlo.reduce(%arg1 init: %cst_6) applies stablehlo.multiply across dimensions = [1] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<8x24xf16>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f16>
    %8 = stablehlo.reduce(%arg0 init: %cst_7) applies stablehlo.add across dimensions = [2] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<8x16xf16>
    %cst_8 = stablehlo.constant dense<0xFC00> : tensor<f16>
    %9 = stablehlo.reduce(%arg0 init: %cst_8) applies stablehlo.maximum across dimensions = [2] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<8x16xf16>
    %cst_9 = stablehlo.constant dense<0x7C00> : tensor<f16>
    %10 = stablehlo.reduce(%arg0 init: %cst_9) applies stablehlo.minimum across dimensions = [2] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<8x16xf16>
    %cst_10 = stablehlo.constant dense<1.000000e+00> : tensor<f16>
    %11 = stablehlo.reduce(%arg1 init: %cst_10) applies stablehlo.multiply across dimensions = [2] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<8x16xf16>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f16>
    %12 = stablehlo.reduce(%arg0 init: %cst_11) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<24xf16>
    %cst_12 = stablehlo.constant dense<0xFC00> : tensor<f16>
    %13 = stablehlo.reduce(%arg0 init: %cst_12) applies stablehlo.maximum across dimensions = [1, 2] : (tensor<8x16x24xf16>, tensor<f16>) -> tensor<8xf16>
    return %1, %5, %13, %9, %2, %6, %10, %3, %7, %11, %0, %12, %4, %8 : tensor<16x24xf16>, tensor<8x24xf16>, tensor<8xf16>, tensor<8x16xf16>, tensor<16x24xf16>, tensor<8x24xf16>, tensor<8x16xf16>, tensor<16x24xf16>, tensor<8x24xf16>, tensor<8x16xf16>, tensor<16x24xf16>, tensor<24xf16>, tensor<8x24xf16>, tensor<8x16xf16>
  }
}

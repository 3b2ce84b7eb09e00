module @jit_lax_reduce_i64 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x16x24xi64>, %arg1: tensor<8x16x24xi64>) -> (tensor<16x24xi64> {jax.result_info = "result['max0']"}, tensor<8x24xi64> {jax.result_info = "result['max1']"}, tensor<8xi64> {jax.result_info = "result['max12']"}, tensor<8x16xi64> {jax.result_info = "result['max2']"}, tensor<16x24xi64> {jax.result_info = "result['min0']"}, tensor<8x24xi64> {jax.result_info = "result['min1']"}, tensor<8x16xi64> {jax.result_info = "result['min2']"}, tensor<16x24xi64> {jax.result_info = "result['prod0']"}, tensor<8x24xi64> {jax.result_info = "result['prod1']"}, tensor<8x16xi64> {jax.result_info = "result['prod2']"}, tensor<16x24xi64> {jax.result_info = "result['sum0']"}, tensor<24xi64> {jax.result_info = "result['sum01']"}, tensor<8x24xi64> {jax.result_info = "result['sum1']"}, tensor<8x16xi64> {jax.result_info = "result['sum2']"}) {
    %c = stablehlo.constant dense<0> : tensor<i64>
    %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<16x24xi64>
    %c_0 = stablehlo.constant dense<-9223372036854775808> : tensor<i64>
    %1 = stablehlo.reduce(%arg0 init: %c_0) applies stablehlo.maximum across dimensions = [0] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<16x24xi64>
    %c_1 = stablehlo.constant dense<9223372036854775807> : tensor<i64>
    %2 = stablehlo.reduce(%arg0 init: %c_1) applies stablehlo.minimum across dimensions = [0] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<16x24xi64>
    %c_2 = stablehlo.constant dense<1> : tensor<i64>
    %3 = stablehlo.reduce(%arg1 init: %c_2) applies stablehlo.multiply across dimensions = [0] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<16x24xi64>
    %c_3 = stablehlo.constant dense<0> : tensor<i64>
    %4 = stablehlo.reduce(%arg0 init: %c_3) applies stablehlo.add across dimensions = [1] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<8x24xi64>
    %c_4 = stablehlo.constant dense<-9223372036854775808> : tensor<i64>
    %5 = stablehlo.reduce(%arg0 init: %c_4) applies stablehlo.maximum across dimensions = [1] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<8x24xi64>
    %c_5 = stablehlo.constant dense<9223372036854775807> : tensor<i64>
    %6 = stablehlo.reduce(%arg0 init: %c_5) applies stablehlo.minimum across dimensions = [1] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<8x24xi64>
    %c_6 = stablehlo.constant dense<1> : tensor<i64>
    %7 = stablehlo.reduce(%arg1 init: %c_6) applies stablehlo.multiply across dimensions = [1] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<8x24xi64>
    %c_7 = stablehlo.constant dense<0> : tensor<i64>
    %8 = stablehlo.reduce(%arg0 init: %c_7) applies stablehlo.add across dimensions = [2] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<8x16xi64>
    %c_8 = stablehlo.constant dense<-9223372036854775808> : tensor<i64>
    %9 = stablehlo.reduce(%arg0 init: %c_8) applies stablehlo.maximum across dimensions = [2] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<8x16xi64>
    %c_9 = stablehlo.constant dense<9223372036854775807> : tensor<i64>
    %10 = stablehlo.reduce(%arg0 init: %c_9) applies stablehlo.minimum across dimensions = [2] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<8x16xi64>
    %c_10 = stablehlo.constant dense<1> : tensor<i64>
    %11 = stablehlo.reduce(%arg1 init: %c_10) applies stablehlo.multiply across dimensions = [2] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<8x16xi64>
    %c_11 = stablehlo.constant dense<0> : tensor<i64>
    %12 = stablehlo.reduce(%arg0 init: %c_11) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<24xi64>
    %c_12 = stablehlo.constant dense<-9223372036854775808> : tensor<i64>
    %13 = stablehlo.reduce(%arg0 init: %c_12) applies stablehlo.maximum across dimensions = [1, 2] : (tensor<8x16x24xi64>, tensor<i64>) -> tensor<8xi64>
    return %1, %5, %13, %9, %2, %6, %10, %3, %7, %11, %0, %12, %4, %8 : tensor<16x24xi64>, tensor<8x24xi64>, tensor<8xi64>, tensor<8x16xi64>, tensor<16x24xi64>, tensor<8x24xi64>, tensor<8x16xi64>, tensor<16x24xi64>, tensor<8x24xi64>, tensor<8x16xi64>, tensor<16x24xi64>, tensor<24xi64>, tensor<8x24xi64>, tensor<8x16xi64>
  }
}

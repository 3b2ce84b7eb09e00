module @jit_lax_compare_i8 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xi8>, %arg1: tensor<32x48xi8>) -> (tensor<32x48xi8> {jax.result_info = "result['clamp']"}, tensor<32x48xi1> {jax.result_info = "result['eq']"}, tensor<32x48xi1> {jax.result_info = "result['ge']"}, tensor<32x48xi1> {jax.result_info = "result['gt']"}, tensor<32x48xi1> {jax.result_info = "result['le']"}, tensor<32x48xi1> {jax.result_info = "result['lt']"}, tensor<32x48xi1> {jax.result_info = "result['ne']"}, tensor<32x48xi8> {jax.result_info = "result['select']"}) {
    %0 = stablehlo.compare EQ, %arg0, %arg1, SIGNED : (tensor<32x48xi8>, tensor<32x48xi8>) -> tensor<32x48xi1>
    %1 = stablehlo.compare NE, %arg0, %arg1, SIGNED : (tensor<32x48xi8>, tensor<32x48xi8>) -> tensor<32x48xi1>
    %2 = stablehlo.compare LT, %arg0, %arg1, SIGNED : (tensor<32x48xi8>, tensor<32x48xi8>) -> tensor<32x48xi1>
    %3 = stablehlo.compare LE, %arg0, %arg1, SIGNED : (tensor<32x48xi8>, tensor<32x48xi8>) -> tensor<32x48xi1>
    %4 = stablehlo.compare GT, %arg0, %arg1, SIGNED : (tensor<32x48xi8>, tensor<32x48xi8>) -> tensor<32x48xi1>
    %5 = stablehlo.compare GE, %arg0, %arg1, SIGNED : (tensor<32x48xi8>, tensor<32x48xi8>) -> tensor<32x48xi1>
    %6 = stablehlo.compare LT, %arg0, %arg1, SIGNED : (tensor<32x48xi8>, tensor<32x48xi8>) -> tensor<32x48xi1>
    %7 = stablehlo.select %6, %arg0, %arg1 : tensor<32x48xi1>, tensor<32x48xi8>
    %c = stablehlo.constant dense<-2> : tensor<i8>
    %c_0 = stablehlo.constant dense<2> : tensor<i8>
    %8 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i8>) -> tensor<32x48xi8>
    %9 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i8>) -> tensor<32x48xi8>
    %10 = stablehlo.clamp %8, %arg0, %9 : tensor<32x48xi8>
    return %10, %0, %5, %4, %3, %2, %1, %7 : tensor<32x48xi8>, tensor<32x48xi1>, tensor<32x48xi1>, tensor<32x48xi1>, tensor<32x48xi1>, tensor<32x48xi1>, tensor<32x48xi1>, tensor<32x48xi8>
  }
}

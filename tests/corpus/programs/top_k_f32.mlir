module @jit_top_k_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x128xf32>) -> (tensor<16x8xf32> {jax.result_info = "result[0]"}, tensor<16x8xi32> {jax.result_info = "result[1]"}) {
    %values, %indices = chlo.top_k(%arg0, k = 8) : tensor<16x128xf32> -> (tensor<16x8xf32>, tensor<16x8xi32>)
    return %values, %indices : tensor<16x8xf32>, tensor<16x8xi32>
  }
}

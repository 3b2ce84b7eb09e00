module @jit_identity_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x128xf32>) -> (tensor<16x128xf32> {jax.result_info = "result"}) {
    %0 = call @identity(%arg0) : (tensor<16x128xf32>) -> tensor<16x128xf32>
    return %0 : tensor<16x128xf32>
  }
  func.func private @identity(%arg0: tensor<16x128xf32>) -> tensor<16x128xf32> {
    return %arg0 : tensor<16x128xf32>
  }
}

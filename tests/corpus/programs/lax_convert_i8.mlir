module @jit_lax_convert_i8 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xi8>) -> (tensor<32x48xbf16> {jax.result_info = "result['bf16']"}, tensor<32x48xi1> {jax.result_info = "result['bool']"}, tensor<32x48xf16> {jax.result_info = "result['f16']"}, tensor<32x48xf32> {jax.result_info = "result['f32']"}, tensor<32x48xi16> {jax.result_info = "result['i16']"}, tensor<32x48xi32> {jax.result_info = "result['i32']"}) {
    %0 = stablehlo.convert %arg0 : (tensor<32x48xi8>) -> tensor<32x48xi16>
    %1 = stablehlo.convert %arg0 : (tensor<32x48xi8>) -> tensor<32x48xi32>
    %2 = stablehlo.convert %arg0 : (tensor<32x48xi8>) -> tensor<32x48xf16>
    %3 = stablehlo.convert %arg0 : (tensor<32x48xi8>) -> tensor<32x48xbf16>
    %4 = stablehlo.convert %arg0 : (tensor<32x48xi8>) -> tensor<32x48xf32>
    %c = stablehlo.constant dense<0> : tensor<i8>
    %5 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i8>) -> tensor<32x48xi8>
    %6 = stablehlo.compare NE, %arg0, %5, SIGNED : (tensor<32x48xi8>, tensor<32x48xi8>) -> tensor<32x48xi1>
    %7 = stablehlo.convert %6 : tensor<32x48xi1>
    return %3, %7, %2, %4, %0, %1 : tensor<32x48xbf16>, tensor<32x48xi1>, tensor<32x48xf16>, tensor<32x48xf32>, tensor<32x48xi16>, tensor<32x48xi32>
  }
}

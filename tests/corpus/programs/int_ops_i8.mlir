module @jit_int_ops_i8 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x64xi8>, %arg1: tensor<32x64xi8>, %arg2: tensor<32x64xi8>, %arg3: tensor<32x64xi8>) -> (tensor<32x64xi8> {jax.result_info = "result['abs']"}, tensor<32x64xi8> {jax.result_info = "result['add']"}, tensor<32x64xi8> {jax.result_info = "result['and']"}, tensor<32x64xi8> {jax.result_info = "result['div']"}, tensor<32x64xi1> {jax.result_info = "result['eq']"}, tensor<32x64xi8> {jax.result_info = "result['floordiv']"}, tensor<32x64xi1> {jax.result_info = "result['ge']"}, tensor<32x64xi1> {jax.result_info = "result['lt']"}, tensor<32x64xi8> {jax.result_info = "result['max']"}, tensor<32x64xi8> {jax.result_info = "result['min']"}, tensor<32x64xi8> {jax.result_info = "result['mod']"}, tensor<32x64xi8> {jax.result_info = "result['mul']"}, tensor<32x64xi8> {jax.result_info = "result['not']"}, tensor<32x64xi8> {jax.result_info = "result['or']"}, tensor<32x64xi8> {jax.result_info = "result['rem']"}, tensor<32x64xi8> {jax.result_info = "result['shl']"}, tensor<32x64xi8> {jax.result_info = "result['shr_arith']"}, tensor<32x64xi8> {jax.result_info = "result['shr_logical']"}, tensor<32x64xi8> {jax.result_info = "result['xor']"}) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<32x64xi8>
    %1 = stablehlo.multiply %arg0, %arg1 : tensor<32x64xi8>
    %2 = stablehlo.and %arg0, %arg1 : tensor<32x64xi8>
    %3 = stablehlo.or %arg0, %arg1 : tensor<32x64xi8>
    %4 = stablehlo.xor %arg0, %arg1 : tensor<32x64xi8>
    %5 = stablehlo.not %arg0 : tensor<32x64xi8>
    %6 = stablehlo.shift_left %arg0, %arg3 : tensor<32x64xi8>
    %7 = stablehlo.shift_right_arithmetic %arg0, %arg3 : tensor<32x64xi8>
    %8 = stablehlo.shift_right_logical %arg0, %arg3 : tensor<32x64xi8>
    %9 = call @floor_divide(%arg0, %arg2) : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi8>
    %10 = call @remainder(%arg0, %arg2) : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi8>
    %11 = stablehlo.divide %arg0, %arg2 : tensor<32x64xi8>
    %12 = stablehlo.remainder %arg0, %arg2 : tensor<32x64xi8>
    %13 = stablehlo.compare EQ, %arg0, %arg1, SIGNED : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi1>
    %14 = stablehlo.compare LT, %arg0, %arg1, SIGNED : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi1>
    %15 = stablehlo.compare GE, %arg0, %arg1, SIGNED : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi1>
    %16 = stablehlo.minimum %arg0, %arg1 : tensor<32x64xi8>
    %17 = stablehlo.maximum %arg0, %arg1 : tensor<32x64xi8>
    %18 = stablehlo.abs %arg0 : tensor<32x64xi8>
    return %18, %0, %2, %11, %13, %9, %15, %14, %17, %16, %10, %1, %5, %3, %12, %6, %7, %8, %4 : tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi1>, tensor<32x64xi8>, tensor<32x64xi1>, tensor<32x64xi1>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>
  }
  func.func private @floor_divide(%arg0: tensor<32x64xi8>, %arg1: tensor<32x64xi8>) -> tensor<32x64xi8> {
    %0 = stablehlo.divide %arg0, %arg1 : tensor<32x64xi8>
    %1 = stablehlo.sign %arg0 : tensor<32x64xi8>
    %2 = stablehlo.sign %arg1 : tensor<32x64xi8>
    %3 = stablehlo.compare NE, %1, %2, SIGNED : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi1>
    %4 = stablehlo.remainder %arg0, %arg1 : tensor<32x64xi8>
    %c = stablehlo.constant dense<0> : tensor<i8>
    %5 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i8>) -> tensor<32x64xi8>
    %6 = stablehlo.compare NE, %4, %5, SIGNED : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi1>
    %7 = stablehlo.and %3, %6 : tensor<32x64xi1>
    %c_0 = stablehlo.constant dense<1> : tensor<i8>
    %8 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i8>) -> tensor<32x64xi8>
    %9 = stablehlo.subtract %0, %8 : tensor<32x64xi8>
    %10 = call @_where(%7, %9, %0) : (tensor<32x64xi1>, tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi8>
    return %10 : tensor<32x64xi8>
  }
  func.func private @_where(%arg0: tensor<32x64xi1>, %arg1: tensor<32x64xi8>, %arg2: tensor<32x64xi8>) -> tensor<32x64xi8> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<32x64xi1>, tensor<32x64xi8>
    return %0 : tensor<32x64xi8>
  }
  func.func private @remainder(%arg0: tensor<32x64xi8>, %arg1: tensor<32x64xi8>) -> tensor<32x64xi8> {
    %c = stablehlo.constant dense<0> : tensor<i8>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i8>) -> tensor<32x64xi8>
    %1 = stablehlo.compare EQ, %arg1, %0, SIGNED : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi1>
    %c_0 = stablehlo.constant dense<1> : tensor<i8>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i8>) -> tensor<32x64xi8>
    %3 = call @_where(%1, %2, %arg1) : (tensor<32x64xi1>, tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi8>
    %4 = stablehlo.remainder %arg0, %3 : tensor<32x64xi8>
    %c_1 = stablehlo.constant dense<0> : tensor<i8>
    %5 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i8>) -> tensor<32x64xi8>
    %6 = stablehlo.compare NE, %4, %5, SIGNED : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi1>
    %c_2 = stablehlo.constant dense<0> : tensor<i8>
    %7 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i8>) -> tensor<32x64xi8>
    %8 = stablehlo.compare LT, %4, %7, SIGNED : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi1>
    %c_3 = stablehlo.constant dense<0> : tensor<i8>
    %9 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i8>) -> tensor<32x64xi8>
    %10 = stablehlo.compare LT, %3, %9, SIGNED : (tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<32x64xi1>
    %11 = stablehlo.compare NE, %8, %10, UNSIGNED : (tensor<32x64xi1>, tensor<32x64xi1>) -> tensor<32x64xi1>
    %12 = stablehlo.and %11, %6 : tensor<32x64xi1>
    %13 = stablehlo.add %4, %3 : tensor<32x64xi8>
    %14 = stablehlo.select %12, %13, %4 : tensor<32x64xi1>, tensor<32x64xi8>
    return %14 : tensor<32x64xi8>
  }
}

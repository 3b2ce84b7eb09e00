module @jit_concat_slice_pad_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x24xf32>, %arg1: tensor<16x24xf32>) -> (tensor<14x52xf32> {jax.result_info = "result"}) {
    %0 = call @_crop_pad(%arg0) : (tensor<16x24xf32>) -> tensor<16x24xf32>
    %1 = call @_crop_pad(%arg1) : (tensor<16x24xf32>) -> tensor<16x24xf32>
    %2 = stablehlo.concatenate %0, %1, dim = 1 : (tensor<16x24xf32>, tensor<16x24xf32>) -> tensor<16x48xf32>
    %3 = call @_pad_0(%2) : (tensor<16x48xf32>) -> tensor<20x48xf32>
    %4 = stablehlo.slice %2 [0:4, 0:48] : (tensor<16x48xf32>) -> tensor<4x48xf32>
    %5 = stablehlo.concatenate %3, %4, dim = 0 : (tensor<20x48xf32>, tensor<4x48xf32>) -> tensor<24x48xf32>
    %6 = stablehlo.slice %5 [0:24:2, 1:47] : (tensor<24x48xf32>) -> tensor<12x46xf32>
    %7 = call @_pad_1(%6) : (tensor<12x46xf32>) -> tensor<14x52xf32>
    return %7 : tensor<14x52xf32>
  }
  func.func private @_crop_pad(%arg0: tensor<16x24xf32>) -> tensor<16x24xf32> {
    %0 = stablehlo.slice %arg0 [1:16, 0:24] : (tensor<16x24xf32>) -> tensor<15x24xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = call @_pad(%0, %c) : (tensor<15x24xf32>, tensor<i32>) -> tensor<16x25xf32>
    %2 = stablehlo.slice %1 [0:16, 0:24] : (tensor<16x25xf32>) -> tensor<16x24xf32>
    return %2 : tensor<16x24xf32>
  }
  func.func private @_pad(%arg0: tensor<15x24xf32>, %arg1: tensor<i32>) -> tensor<16x25xf32> {
    %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %1 = stablehlo.pad %arg0, %0, low = [0, 1], high = [1, 0], interior = [0, 0] : (tensor<15x24xf32>, tensor<f32>) -> tensor<16x25xf32>
    return %1 : tensor<16x25xf32>
  }
  func.func private @_pad_0(%arg0: tensor<16x48xf32>) -> tensor<20x48xf32> {
    %0 = stablehlo.slice %arg0 [0:1, 0:48] : (tensor<16x48xf32>) -> tensor<1x48xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0, 2] : (tensor<1x48xf32>) -> tensor<1x2x48xf32>
    %2 = stablehlo.reshape %1 : (tensor<1x2x48xf32>) -> tensor<2x48xf32>
    %3 = stablehlo.slice %arg0 [15:16, 0:48] : (tensor<16x48xf32>) -> tensor<1x48xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 2] : (tensor<1x48xf32>) -> tensor<1x2x48xf32>
    %5 = stablehlo.reshape %4 : (tensor<1x2x48xf32>) -> tensor<2x48xf32>
    %6 = stablehlo.concatenate %2, %arg0, %5, dim = 0 : (tensor<2x48xf32>, tensor<16x48xf32>, tensor<2x48xf32>) -> tensor<20x48xf32>
    %7 = stablehlo.slice %6 [0:20, 0:1] : (tensor<20x48xf32>) -> tensor<20x1xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0, 1] : (tensor<20x1xf32>) -> tensor<20x1x0xf32>
    %9 = stablehlo.reshape %8 : (tensor<20x1x0xf32>) -> tensor<20x0xf32>
    %10 = stablehlo.slice %6 [0:20, 47:48] : (tensor<20x48xf32>) -> tensor<20x1xf32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [0, 1] : (tensor<20x1xf32>) -> tensor<20x1x0xf32>
    %12 = stablehlo.reshape %11 : (tensor<20x1x0xf32>) -> tensor<20x0xf32>
    %13 = stablehlo.concatenate %9, %6, %12, dim = 1 : (tensor<20x0xf32>, tensor<20x48xf32>, tensor<20x0xf32>) -> tensor<20x48xf32>
    return %13 : tensor<20x48xf32>
  }
  func.func private @_pad_1(%arg0: tensor<12x46xf32>) -> tensor<14x52xf32> {
    %0 = stablehlo.slice %arg0 [1:2, 0:46] : (tensor<12x46xf32>) -> tensor<1x46xf32>
    %1 = call @_flip(%0) : (tensor<1x46xf32>) -> tensor<1x46xf32>
    %2 = stablehlo.concatenate %1, %arg0, dim = 0 : (tensor<1x46xf32>, tensor<12x46xf32>) -> tensor<13x46xf32>
    %3 = stablehlo.slice %2 [11:12, 0:46] : (tensor<13x46xf32>) -> tensor<1x46xf32>
    %4 = call @_flip(%3) : (tensor<1x46xf32>) -> tensor<1x46xf32>
    %5 = stablehlo.concatenate %2, %4, dim = 0 : (tensor<13x46xf32>, tensor<1x46xf32>) -> tensor<14x46xf32>
    %6 = stablehlo.slice %5 [0:14, 1:4] : (tensor<14x46xf32>) -> tensor<14x3xf32>
    %7 = call @_flip_2(%6) : (tensor<14x3xf32>) -> tensor<14x3xf32>
    %8 = stablehlo.concatenate %7, %5, dim = 1 : (tensor<14x3xf32>, tensor<14x46xf32>) -> tensor<14x49xf32>
    %9 = stablehlo.slice %8 [0:14, 45:48] : (tensor<14x49xf32>) -> tensor<14x3xf32>
    %10 = call @_flip_2(%9) : (tensor<14x3xf32>) -> tensor<14x3xf32>
    %11 = stablehlo.concatenate %8, %10, dim = 1 : (tensor<14x49xf32>, tensor<14x3xf32>) -> tensor<14x52xf32>
    return %11 : tensor<14x52xf32>
  }
  func.func private @_flip(%arg0: tensor<1x46xf32>) -> tensor<1x46xf32> {
    %0 = stablehlo.reverse %arg0, dims = [0] : tensor<1x46xf32>
    return %0 : tensor<1x46xf32>
  }
  func.func private @_flip_2(%arg0: tensor<14x3xf32>) -> tensor<14x3xf32> {
    %0 = stablehlo.reverse %arg0, dims = [1] : tensor<14x3xf32>
    return %0 : tensor<14x3xf32>
  }
}

// Pad a 250x1000 activation to 256x1024 with zeros, then scale and ReLU.
// Fusion: one loop group. The kernel reads x through the pad with loads
// masked by x's bounds; no padded copy is made.
func.func @main(%x: tensor<250x1000xf32>, %s: tensor<1024xf32>) -> tensor<256x1024xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %zeros = stablehlo.constant dense<0.0> : tensor<256x1024xf32>
  %p = stablehlo.pad %x, %zero, low = [0, 0], high = [6, 24], interior = [0, 0]
      : (tensor<250x1000xf32>, tensor<f32>) -> tensor<256x1024xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<1024xf32>) -> tensor<256x1024xf32>
  %m = stablehlo.multiply %p, %sb : tensor<256x1024xf32>
  %y = stablehlo.maximum %m, %zeros : tensor<256x1024xf32>
  return %y : tensor<256x1024xf32>
}

// The tutorial's model (docs/tutorial.md): y = x * b + x, 64x256 f32.
func.func @main(%x: tensor<64x256xf32>, %b: tensor<256xf32>) -> tensor<64x256xf32> {
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<256xf32>) -> tensor<64x256xf32>
  %e = stablehlo.multiply %x, %bb : tensor<64x256xf32>
  %y = stablehlo.add %e, %x : tensor<64x256xf32>
  return %y : tensor<64x256xf32>
}

// Seed 000's diamond: log(x) is read directly and through a transpose by one add.
// Fusion (index safety): the transpose group would evaluate log twice per
// element; one log costs 4 <= the bound of 4, so it is recomputed (and the
// plan says so) instead of written out and read back. A costlier producer
// would get a group of its own (tests/test_fusion_rules.py).
func.func @main(%x: tensor<20x160x160xf32>) -> tensor<20x160x160xf32> {
  %l = stablehlo.log %x : tensor<20x160x160xf32>
  %t = stablehlo.transpose %l, dims = [0, 2, 1] : (tensor<20x160x160xf32>) -> tensor<20x160x160xf32>
  %y = stablehlo.add %l, %t : tensor<20x160x160xf32>
  return %y : tensor<20x160x160xf32>
}

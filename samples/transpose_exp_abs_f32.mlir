// Seed 000: a transpose that moves the innermost dim, then exp and abs.
// Fusion: one transpose group (the transpose is the hero, exp/abs join it).
func.func @main(%x: tensor<20x160x170xf32>) -> tensor<170x20x160xf32> {
  %t = stablehlo.transpose %x, dims = [2, 0, 1] : (tensor<20x160x170xf32>) -> tensor<170x20x160xf32>
  %e = stablehlo.exponential %t : tensor<170x20x160xf32>
  %a = stablehlo.abs %e : tensor<170x20x160xf32>
  return %a : tensor<170x20x160xf32>
}

// GELU (tanh approximation): the f32 copy of gelu_bf16.mlir.
func.func @main(%x: tensor<6x512x4096xf32>) -> tensor<6x512x4096xf32> {
  %half = stablehlo.constant dense<5.000000e-01> : tensor<6x512x4096xf32>
  %one = stablehlo.constant dense<1.000000e+00> : tensor<6x512x4096xf32>
  %c = stablehlo.constant dense<7.978845e-01> : tensor<6x512x4096xf32>
  %k = stablehlo.constant dense<4.471500e-02> : tensor<6x512x4096xf32>
  %x2 = stablehlo.multiply %x, %x : tensor<6x512x4096xf32>
  %x3 = stablehlo.multiply %x2, %x : tensor<6x512x4096xf32>
  %t0 = stablehlo.multiply %k, %x3 : tensor<6x512x4096xf32>
  %t1 = stablehlo.add %x, %t0 : tensor<6x512x4096xf32>
  %t2 = stablehlo.multiply %c, %t1 : tensor<6x512x4096xf32>
  %t3 = stablehlo.tanh %t2 : tensor<6x512x4096xf32>
  %t4 = stablehlo.add %one, %t3 : tensor<6x512x4096xf32>
  %t5 = stablehlo.multiply %half, %x : tensor<6x512x4096xf32>
  %y = stablehlo.multiply %t5, %t4 : tensor<6x512x4096xf32>
  return %y : tensor<6x512x4096xf32>
}

// The "transpose" kernel: XLA's transpose emitter as a transform-dialect
// strategy (IREE 3.13).
//
// Applies to a dispatch whose root is an all-parallel linalg.generic with one
// input (the "staged" input) whose innermost dim is not the output's
// innermost dim (the two dims swap: a read-permuted input, or an identity
// input with a write-permuted output, as IREE canonicalizes a pure
// transpose). Elementwise ops in the generic's body and further inputs
// indexed like the output are allowed.
//
// Layout of the work. A workgroup owns a T x T tile of the two swapping
// iteration dims `a` (the staged input's innermost) and `b` (the output's
// innermost), 1 of every other dim. Phase 1: the threads copy the staged
// input's tile into workgroup memory, thread x along `a` (coalesced global
// reads, consecutive shared writes). A barrier. Phase 2: the threads run the
// generic on the tile, thread x along `b`: the generic reads the shared tile
// transposed (stride T+1 between neighbouring threads: the tile is padded
// to T x (T+1), so no bank conflicts), applies the elementwise body (after
// the shared read), reads any other input directly (indexed like the
// output: coalesced) and writes the output coalesced.
//
// Parameters (tilefuse.param tags; the defaults are for a 1024x1024 f32
// transpose whose generic is (d0,d1) -> in (d0,d1), out (d1,d0)):
//   staged_input      position of the staged input among the root's operands
//   root_inputs       position of the root's input(s) fused from producers
//                     (the dispatch loads)
//   workgroup_tile    Ta on `a`, Tb on `b`, 1 on every other dim, except
//                     that dims beyond three block ids (rank > 3) get 0: kept
//                     whole per workgroup and walked in each thread's piece;
//                     mapping: blocks z/y/x over the tiled dims in order
//   copy_threads      threads per dim of the staged input's tile, in the
//                     INPUT's dim order: Ta on `a` (thread<x>, one element
//                     each), Tb/R on `b` (thread<y>, R each), 0
//                     elsewhere. By thread count, not tile size, so that a
//                     ragged edge tile keeps the same threads, each with a
//                     smaller (masked) piece.
//   compute_threads   threads per dim of the generic's tile, in iteration
//                     order: Tb on `b` (thread<x>), Ta/R on `a` (thread<y>),
//                     0 elsewhere.
//   copy_vector, compute_vector
//                     vector sizes = a full tile's per-thread pieces (unit
//                     dims as 1); masked where an edge piece is smaller.
//   bank_padding_bits the shared tile's row padding in bits (one element:
//                     32 for f32, 16 for f16); 0 disables.
//   workgroup_dims, translation_info: [T, T/R, 1]
// Optional step (tilefuse.step): "static_tile", with ragged tiles on CUDA.
// Constraints (python/tilefuse/strategies/transpose.py chooses): Ta and Tb
// divide the sizes of `a` and `b` where a divisor large enough exists;
// otherwise the last tile is ragged and its transfers are masked; R divides
// Ta and Tb; Ta*Tb/R <= max threads; Ta*(Tb+1)*elem_bytes <= shared memory.
module attributes {transform.with_named_sequence} {
  transform.named_sequence private @tilefuse_find_root(%dispatch: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op)

  transform.named_sequence private @tilefuse_lower_masks(%func: !transform.any_op {transform.readonly})

  transform.named_sequence private @tilefuse_skip(%handle: !transform.any_op {transform.readonly})

  // Step "static_tile", for ragged tiles on CUDA: the staging buffer,
  // sized by the edge tile's extent, becomes a full tile's static buffer
  // (the bound of that extent) used through a view, so that step 8 can pad
  // its rows (it pads static buffers only). Hoisting adds a dealloc of the
  // buffer at the end, which IREE's CUDA lowering drops but its SPIR-V
  // lowering cannot take once padding has put a view in between: on SPIR-V
  // a ragged tile stays dynamic and unpadded (the chooser says so). The
  // dealloc also keeps the barrier after phase 2 alive (a bar.sync before
  // the kernel returns). It must run here, before the foralls are mapped:
  // after, it finds no bound for the buffer's size.
  transform.named_sequence @tilefuse_transpose_static_tile(%func: !transform.any_op {transform.readonly}) {
    transform.iree.hoist_static_alloc %func : (!transform.any_op) -> ()
    transform.yield
  }

  transform.named_sequence @tilefuse_transpose(%dispatch: !transform.any_op {transform.readonly}) {
    // Step 1. The root (shared step, transform_scripts/common.mlir).
    %func, %root = transform.include @tilefuse_find_root failures(propagate) (%dispatch)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 2. Tile the root to workgroups, a T x T tile of the swapping dims
    // each, and pull the dispatch loads into the tile so that each
    // workgroup reads only its slices.
    %operands = transform.get_operand %root[0] {tilefuse.param = "root_inputs"}
      : (!transform.any_op) -> !transform.any_value
    %producers = transform.get_defining_op %operands
      : (!transform.any_value) -> !transform.any_op
    %wg_root, %grid = transform.structured.tile_using_forall %root
        tile_sizes [32, 32] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %producers into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid
      : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 3. Stage the input: copy its workgroup slice into a fresh tensor
    // (a linalg.copy into tensor.empty). Bufferization (step 6) places the
    // copy's destination in workgroup memory because it is allocated
    // inside the workgroup forall.
    %copy = transform.iree.copy_tensor_operand %wg_root [0] {tilefuse.param = "staged_input"}
      : (!transform.any_op) -> !transform.any_op

    // Step 4. Phase 1: the copy over threads, thread x along the input's
    // innermost dim (coalesced global load, conflict-free shared store),
    // R rows per thread along thread y.
    %t_copy, %copy_forall = transform.structured.tile_using_forall %copy
        num_threads [8, 32] (mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>])
        {tilefuse.param = "copy_threads"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // Vectorize the copy at once: canonicalization erases a linalg.copy on
    // tensors (an identity op: its result is replaced by its input), which
    // would silently drop the staging (the forall then only forwards slices).
    transform.structured.vectorize %t_copy vector_sizes [4, 1]
        {tilefuse.param = "copy_vector"} : !transform.any_op

    // Step 5. Phase 2: the generic over threads, thread x along the
    // output's innermost dim (coalesced global store; transposed shared
    // read), R elements per thread along thread y. A separate forall after
    // the copy's: mapping them to threads puts a barrier between them.
    %t_root, %compute_forall = transform.structured.tile_using_forall %wg_root
        num_threads [32, 8] (mapping = [#gpu.thread<linear_dim_0>, #gpu.thread<linear_dim_1>])
        {tilefuse.param = "compute_threads"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Vectorize each thread's piece: one transfer_read / transfer_write per
    // thread and phase (lowered to 1-D / scalar accesses in step 8).
    transform.structured.vectorize %t_root vector_sizes [1, 4]
        {tilefuse.param = "compute_vector"} : !transform.any_op
    transform.include @tilefuse_lower_masks failures(propagate) (%func)
      : (!transform.any_op) -> ()

    // Step 6. Bufferize: the output tile is written straight into the
    // output binding; the staging tensor becomes a memref.alloc in
    // #gpu.address_space<workgroup>. With ragged tiles it is sized by the
    // edge tile's extent (step "static_tile", above).
    transform.iree.eliminate_empty_tensors %func : (!transform.any_op) -> ()
    %bufferized = transform.iree.bufferize <{target_gpu}> %func
      : (!transform.any_op) -> !transform.any_op
    transform.include @tilefuse_transpose_static_tile failures(propagate) (%bufferized)
        {tilefuse.step = "static_tile"} : (!transform.any_op) -> ()
    // Bufferization leaves self-copies (a linalg.generic copying a subview
    // onto an identical subview): only after CSE are the two the same value,
    // so canonicalize, CSE, canonicalize again to erase them.
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op
    // The staging copy is bufferized as a linalg.generic copy (global
    // subview -> workgroup subview, one R x 1 piece per thread, with the
    // barriers IREE's GPU memcpy puts around it): vectorize it now.
    %left = transform.structured.match interface{LinalgOp} in %bufferized
      : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %left : !transform.any_op
    transform.include @tilefuse_lower_masks failures(propagate) (%bufferized)
      : (!transform.any_op) -> ()

    // Step 7. Foralls onto workgroup ids and thread ids. Mapping the two
    // thread foralls inserts a gpu.barrier after each; the one between the
    // phases is the one that matters (eliminate_gpu_barriers drops the
    // others when it can prove them useless).
    transform.iree.forall_to_workgroup %bufferized : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %bufferized
        workgroup_dims = [256, 1, 1] subgroup_size = 8
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()
    %nobar = transform.iree.eliminate_gpu_barriers %bufferized : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %nobar {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %nobar : !transform.any_op

    // Step 8. Pad the shared tile's rows (T x T -> T x (T+P)): the
    // transposed read in phase 2 then hits T different banks.
    transform.iree.reduce_shared_memory_bank_conflicts %nobar <{padding_size_bits = 32 : i64}>
        {tilefuse.param = "bank_padding_bits"}
      : (!transform.any_op) -> ()

    // Lower the vectors to what SPIR-V / NVVM take: 1-D transfers (the
    // transposed read becomes scalar loads, one per element).
    transform.include @tilefuse_lower_masks failures(propagate) (%nobar)
      : (!transform.any_op) -> ()
    transform.apply_patterns to %nobar {
      transform.apply_patterns.vector.materialize_masks
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    // (lower_transfer + lower_transpose + permutation patterns in one set ran
    // the compiler out of memory, 23 GB: keep them apart, unroll to scf.)
    // The transposed read of the shared tile first becomes a read along the
    // tile's rows and a vector.transpose: unrolling a masked transposed read
    // (a ragged tile) keeps the whole mask on each 1-D piece, which does not
    // verify ("inferred mask type ... don't match").
    transform.apply_patterns to %nobar {
      transform.apply_patterns.vector.transfer_permutation_patterns
    } : !transform.any_op
    transform.apply_patterns to %nobar {
      transform.apply_patterns.vector.transfer_to_scf full_unroll = true max_transfer_rank = 1
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %nobar {
      transform.apply_patterns.memref.fold_memref_alias_ops
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %nobar : !transform.any_op

    // Step 9. Finished: no further pipeline, this workgroup size.
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [256, 1, 1]
        subgroup_size = 8> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %nobar "translation_info" = %done
      : !transform.any_op, !transform.any_param
    transform.print %nobar : !transform.any_op
    transform.yield
  }
}

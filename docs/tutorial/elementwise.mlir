// A first strategy for an elementwise dispatch (docs/authoring.md), a
// simplified transform_scripts/loop.mlir: tiles of 8 x 64 per workgroup,
// 1 x 4 per thread (a workgroup of 16 x 8 threads), for roots of rank 2
// whose dims 8 and 64 divide. Try it:
//   tilefuse try docs/tutorial/elementwise.mlir MODEL.mlir
module attributes {transform.with_named_sequence} {
  // `tilefuse try` hands the sequence the dispatch's function.
  transform.named_sequence @__transform_main(%func: !transform.any_op {transform.consumed}) {
    // Step 1. The root: the op whose result the dispatch stores (through
    // dispatch.tensor.store on Vulkan, store_to_buffer on CUDA).
    %store = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.store", "iree_codegen.store_to_buffer"]} in %func
      : (!transform.any_op) -> !transform.any_op
    %root = transform.get_producer_of_operand %store[0]
      : (!transform.any_op) -> !transform.any_op

    // Step 2. Tile the root to workgroups (8 rows x 64 columns each) and
    // pull the loads of its inputs into the tile.
    %wg_root, %grid = transform.structured.tile_using_forall %root
        tile_sizes [8, 64] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %loads = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.load", "iree_codegen.load_from_buffer"]} in %func
      : (!transform.any_op) -> !transform.any_op
    transform.structured.fuse_into_containing_op %loads into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid
      : (!transform.any_op) -> ()

    // Step 3. Split the workgroup's tile over 8 x 16 threads: each thread
    // computes 1 x 4 elements. Its inputs are slices (tensor.extract_slice)
    // of the workgroup's, which bufferization turns into views: no copy.
    %thread_root, %threads = transform.structured.tile_using_forall %wg_root
        num_threads [8, 16] (mapping = [#gpu.thread<y>, #gpu.thread<x>])
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // Tiling computed each thread's offset once per slice: one is enough
    // (bufferization then sees the output's slices as the same view).
    transform.apply_cse to %func : !transform.any_op

    // Step 4. Vectorize each thread's 1 x 4 tile into one 4-vector.
    %thread_ops = transform.structured.match interface{LinalgOp} in %threads
      : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %thread_ops vector_sizes [1, 4] : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    } : !transform.any_op

    // Step 5. Bufferize: the kernel writes straight into its output binding.
    transform.iree.eliminate_empty_tensors %func : (!transform.any_op) -> ()
    %kernel = transform.iree.bufferize <{target_gpu}> %func
      : (!transform.any_op) -> !transform.any_op

    // Step 6. Map the foralls onto workgroup ids and thread ids.
    transform.iree.forall_to_workgroup %kernel : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %kernel
        workgroup_dims = [16, 8, 1] subgroup_size = 8
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()
    // Bufferization left copies of each tile onto itself (linalg.generic on
    // memrefs, one view computed twice): CSE makes the two views one value,
    // and canonicalization drops a copy whose source is its destination.
    transform.apply_cse to %kernel : !transform.any_op
    transform.apply_patterns to %kernel {
      transform.apply_patterns.canonicalization
    } : !transform.any_op

    // Step 7. The kernel is finished: no further codegen pipeline, and the
    // workgroup size it was mapped onto.
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [16, 8, 1]
        subgroup_size = 8> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %kernel "translation_info" = %done
      : !transform.any_op, !transform.any_param
    transform.yield
  }
}

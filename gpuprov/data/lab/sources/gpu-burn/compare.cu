// Compares each GPU's results with the first and counts the differing elements.
extern "C" __global__ void compare(float *C, int *faultyElems, size_t iters) {
    size_t iterStep = blockDim.x * blockDim.y * gridDim.x * gridDim.y;
    size_t myIndex = (blockIdx.y * blockDim.y + threadIdx.y) * gridDim.x * blockDim.x
                     + blockIdx.x * blockDim.x + threadIdx.x;
    int myFaulty = 0;
    for (size_t i = 1; i < iters; ++i)
        if (fabsf(C[myIndex] - C[myIndex + i * iterStep]) > 0.0001f) myFaulty++;
    atomicAdd(faultyElems, myFaulty);
}

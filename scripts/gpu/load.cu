// A heavy co-tenant: streams a 1 GiB buffer through the L2 and HBM and runs a dependent FMA
// loop, for the given number of seconds. Backs: docs/reliability.md (a busy GPU refused, a
// load that starts mid-run caught; docs/evidence/2026-11-25-h100-h200-shared-gpu/).
//   nvcc -O2 -o load load.cu && ./load 60
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

__global__ void stream(const float4* __restrict__ x, float4* __restrict__ y, size_t n, int iters) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float4 v = x[i];
        for (int k = 0; k < iters; ++k) {
            v.x = fmaf(v.x, 1.0001f, 0.5f);
            v.y = fmaf(v.y, 1.0001f, 0.5f);
        }
        y[i] = v;
    }
}

int main(int argc, char** argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 60.0;
    size_t n = (1ull << 30) / sizeof(float4);
    float4 *x, *y;
    if (cudaMalloc(&x, n * sizeof(float4)) != cudaSuccess || cudaMalloc(&y, n * sizeof(float4)) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    cudaMemset(x, 0, n * sizeof(float4));
    time_t start = time(nullptr);
    long launches = 0;
    while (difftime(time(nullptr), start) < seconds) {
        stream<<<132 * 8, 256>>>(x, y, n, 16);
        cudaDeviceSynchronize();
        ++launches;
    }
    printf("load: %ld launches in %.0f s\n", launches, seconds);
    return 0;
}

// Probes: which shared-memory configuration the driver picks for a carveout preference and a
// kernel's dynamic shared memory, and what L1 each configuration leaves.
// Backs: docs/measurement.md, "The carveout table" (at carveout 0 % the driver takes the
// smallest configuration that holds the block; a kernel without shared memory gets 32 KiB;
// small non-zero carveouts choose larger configurations than needed;
// docs/evidence/2026-11-25-h100-h200-shared-memory-configurations/).
//
// One kernel, two modes, so both see the same function attributes:
//  mode 0 (L1 size): block 0 chases a cyclic .ca chain (32-byte nodes) of S bytes: one warm
//    pass, two timed passes; cycles per load. The L1 size is found by bisection at 256 B.
//  mode 1 (occupancy): a grid of 64 blocks per SM, 32 threads each; every block counts itself
//    in on its SM, stays 200 us, records the most blocks resident at once, counts itself out.
//    With d bytes of dynamic shared memory and 1 KiB reserved per block, a configuration of
//    C bytes holds floor(C / (d + 1 KiB)) blocks (at most 32): the configuration in force.
//
//   nvcc -O2 -arch=sm_90 -o smem_configs scripts/gpu/smem_configs.cu && ./smem_configs
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

__device__ __forceinline__ uint32_t smid() { uint32_t s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
__device__ __forceinline__ uint64_t gtime() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ uint32_t ld_ca(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__global__ void probe(int mode, const uint32_t* chain, uint32_t nodes, unsigned long long* out,
                      int* resident, int* maxres) {
  // Dynamic shared memory is reserved by the launch and never touched: the kernel itself
  // uses none, so with 0 dynamic bytes it is a kernel without shared memory.
  if (threadIdx.x != 0) return;
  if (mode == 0) {
    if (blockIdx.x != 0) return;
    uint32_t j = 0;
    for (uint32_t i = 0; i < nodes; ++i) j = ld_ca(chain + j);
    long long t0 = clock64();
    for (uint32_t i = 0; i < 2 * nodes; ++i) j = ld_ca(chain + j);
    long long t1 = clock64();
    out[0] = (unsigned long long)(t1 - t0);
    out[1] = j;  // keeps the chase alive
    return;
  }
  uint32_t s = smid();
  int now = atomicAdd(&resident[s], 1) + 1;
  atomicMax(&maxres[s], now);
  uint64_t t = gtime();
  while (gtime() - t < 200000) {
    atomicMax(&maxres[s], atomicAdd(&resident[s], 0));
    __nanosleep(5000);
  }
  atomicSub(&resident[s], 1);
}

int main() {
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int nsm = prop.multiProcessorCount;
  int reserved = 0, optin = 0, persm = 0;
  CHECK(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, 0));
  CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CHECK(cudaDeviceGetAttribute(&persm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0));
  printf("# %s: %d SMs, shared per SM %d, per block opt-in %d, reserved per block %d\n", prop.name,
         nsm, persm, optin, reserved);
  cudaFuncAttributes fa;
  CHECK(cudaFuncGetAttributes(&fa, probe));
  printf("# probe: static shared %zu B, %d registers, max threads %d\n", fa.sharedSizeBytes, fa.numRegs,
         fa.maxThreadsPerBlock);
  CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  const uint32_t max_bytes = 256 * 1024;
  uint32_t* chain;
  unsigned long long* out;
  int *resident, *maxres;
  CHECK(cudaMalloc(&chain, max_bytes));
  CHECK(cudaMalloc(&out, 16));
  CHECK(cudaMalloc(&resident, 1024 * 4));
  CHECK(cudaMalloc(&maxres, 1024 * 4));
  auto cycles_per_load = [&](uint32_t bytes, uint32_t dynbytes) {
    uint32_t nodes = bytes / 32;
    std::vector<uint32_t> h(bytes / 4, 0);
    for (uint32_t i = 0; i < nodes; ++i) h[i * 8] = ((i + 1) % nodes) * 8;
    CHECK(cudaMemcpy(chain, h.data(), bytes, cudaMemcpyHostToDevice));
    probe<<<1, 32, dynbytes>>>(0, chain, nodes, out, resident, maxres);
    CHECK(cudaDeviceSynchronize());
    unsigned long long c[2];
    CHECK(cudaMemcpy(c, out, 16, cudaMemcpyDeviceToHost));
    return (double)c[0] / (2.0 * nodes);
  };
  // Carveout -1: attribute left at the driver default (set once at the end).
  const int carveouts[] = {0, 1, 3, 4, 7, 8, 14, 15, 28, 29, 44, 58, 72, 86, 100};
  const int dyns[] = {0, 16, 1024, 7 * 1024, 15 * 1024, 31 * 1024, 63 * 1024, 99 * 1024,
                      131 * 1024, 163 * 1024, 195 * 1024, 227 * 1024};
  printf("carveout,dyn_bytes,occupancy,config_lower_KiB,config_upper_KiB,l1_bytes,hit_cycles\n");
  for (int pass = 0; pass < 2; ++pass) {
    int ncv = pass == 0 ? (int)(sizeof(carveouts) / sizeof(int)) : 1;
    for (int ci = 0; ci < ncv; ++ci) {
      int cv = pass == 0 ? carveouts[ci] : -1;
      CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributePreferredSharedMemoryCarveout, cv));
      for (int d : dyns) {
        if (d > optin) continue;
        // Occupancy.
        CHECK(cudaMemset(resident, 0, 1024 * 4));
        CHECK(cudaMemset(maxres, 0, 1024 * 4));
        probe<<<nsm * 64, 32, d>>>(1, chain, 0, out, resident, maxres);
        CHECK(cudaDeviceSynchronize());
        std::vector<int> mr(1024);
        CHECK(cudaMemcpy(mr.data(), maxres, 1024 * 4, cudaMemcpyDeviceToHost));
        int occ = 0;
        for (int s = 0; s < nsm; ++s) occ = std::max(occ, mr[s]);
        int per = d + reserved;
        // Config C satisfies occ * per <= C < (occ + 1) * per (unless capped at 32 blocks).
        double lo = occ * per / 1024.0, hi = (occ + 1) * per / 1024.0;
        // L1 size by bisection: hits below 60 cycles per load.
        double hit = cycles_per_load(4096, d);
        uint32_t a = 4096, b = max_bytes;  // a hits, b misses (checked)
        if (cycles_per_load(b, d) < 60) a = b;
        while (b - a > 256) {
          uint32_t m = (a + b) / 2 / 256 * 256;
          if (cycles_per_load(m, d) < 60) a = m; else b = m;
        }
        printf("%d,%d,%d,%.2f,%.2f,%u,%.1f\n", cv, d, occ, lo, hi, a, hit);
        fflush(stdout);
      }
    }
  }
  return 0;
}

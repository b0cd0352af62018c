// Probes: how long one block takes to copy a region into shared memory with cp.async.cg and
// cp.async.ca (16 B per thread), with a kernel specialised per mode, at 128/256/512/1024
// threads and with the copy loop unrolled 1x or 4x, from a 1 MiB source read in warm-up
// rounds (clock() around a barrier-to-barrier round, as memtopo's async-copy benchmark).
// Backs: the second method for memtopo's cp.async latencies in docs/results/h100-deep.md
// (a 226.9 KiB cp.async.cg copy of one block: 2,751 cycles at 256 threads, 2,624 unrolled,
// against memtopo's 2,670 on the same GPU; docs/evidence/2026-11-25-h100-copy-probes/), and
// why tma_check.cu's cp.async figure is higher: its one predicated loop for every mode issues
// about twice the instructions per copy.
// Build: nvcc -O2 -arch=sm_90 -o cpasync_probe cpasync_probe.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern __shared__ __align__(128) unsigned char dyn[];

template <int CG, int UNROLL>
__global__ void rounds(const unsigned char* __restrict__ src, unsigned bytes, unsigned regions, unsigned warm,
                       unsigned timed, unsigned* out, unsigned* check) {
  const unsigned slot = static_cast<unsigned>(__cvta_generic_to_shared(dyn));
  const unsigned tid = threadIdx.x;
  const unsigned step = blockDim.x * 16;
  const unsigned long long gsrc = static_cast<unsigned long long>(__cvta_generic_to_global(src));
  for (unsigned r = 0; r < warm + timed; ++r) {
    const unsigned long long from = gsrc + static_cast<unsigned long long>(r % regions) * bytes;
    __syncthreads();
    const unsigned t0 = static_cast<unsigned>(clock());
#pragma unroll UNROLL
    for (unsigned off = tid * 16; off < bytes; off += step) {
      if (CG) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(slot + off), "l"(from + off) : "memory");
      } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(slot + off), "l"(from + off) : "memory");
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    const unsigned t1 = static_cast<unsigned>(clock());
    if (tid == 0 && r >= warm) out[r - warm] = t1 - t0;
  }
  if (tid == 0) *check = *reinterpret_cast<const unsigned*>(dyn + bytes - 4);
}

static void fail(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("FAILED %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

typedef void (*Kernel)(const unsigned char*, unsigned, unsigned, unsigned, unsigned, unsigned*, unsigned*);

int main() {
  cudaDeviceProp prop{};
  fail(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const unsigned max_bytes = static_cast<unsigned>(prop.sharedMemPerBlockOptin / 128 * 128);
  std::printf("%s, %d SMs, largest copy %u B\n", prop.name, prop.multiProcessorCount, max_bytes);
  struct Variant { const char* name; Kernel k; };
  const Variant variants[] = {{"cg_u1", rounds<1, 1>}, {"cg_u4", rounds<1, 4>}, {"ca_u1", rounds<0, 1>},
                              {"ca_u4", rounds<0, 4>}};
  const size_t span_max = std::max<size_t>(1 << 20, 4 * static_cast<size_t>(max_bytes));
  std::vector<unsigned> host(span_max / 4);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned>(i);
  unsigned char* src = nullptr;
  unsigned *out = nullptr, *check = nullptr;
  fail(cudaMalloc(&src, span_max), "cudaMalloc");
  fail(cudaMemcpy(src, host.data(), span_max, cudaMemcpyHostToDevice), "cudaMemcpy");
  const unsigned timed = 64;
  fail(cudaMalloc(&out, timed * sizeof(unsigned)), "cudaMalloc");
  fail(cudaMalloc(&check, sizeof(unsigned)), "cudaMalloc");
  const unsigned sizes[] = {4096, 32768, 65536, 131072, max_bytes};
  const unsigned threads[] = {128, 256, 512, 1024};
  std::printf("%-6s %7s %8s %6s %6s %6s %8s  %s\n", "path", "threads", "bytes", "p5", "p50", "p95", "B/clk", "check");
  for (const Variant& v : variants) {
    fail(cudaFuncSetAttribute(v.k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(max_bytes)),
         "cudaFuncSetAttribute");
    for (unsigned t : threads) {
      for (unsigned bytes : sizes) {
        const size_t span = std::max<size_t>(1 << 20, 4 * static_cast<size_t>(bytes));
        const unsigned regions = static_cast<unsigned>(span / bytes);
        v.k<<<1, t, bytes>>>(src, bytes, regions, regions, timed, out, check);
        fail(cudaDeviceSynchronize(), v.name);
        std::vector<unsigned> c(timed);
        unsigned got = 0;
        fail(cudaMemcpy(c.data(), out, timed * 4, cudaMemcpyDeviceToHost), "copy back");
        fail(cudaMemcpy(&got, check, 4, cudaMemcpyDeviceToHost), "copy back");
        std::sort(c.begin(), c.end());
        const unsigned last = (regions + timed - 1) % regions;
        const unsigned want = static_cast<unsigned>((static_cast<size_t>(last) + 1) * bytes / 4 - 1);
        std::printf("%-6s %7u %8u %6u %6u %6u %8.1f  %s\n", v.name, t, bytes, c[timed * 5 / 100], c[timed / 2],
                    c[timed * 95 / 100], bytes / static_cast<double>(c[timed / 2]), got == want ? "ok" : "WRONG");
      }
    }
  }
  return 0;
}

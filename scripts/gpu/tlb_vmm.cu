// Issue 16 item 2, an independent cross-check of memtopo's TLB walks: the same L2-path
// (ld.global.cg) pointer chase in (a) one plain cudaMalloc of most of device memory and
// (b) the same bytes as separate 2 MiB physical chunks (cuMemCreate) mapped into one
// reserved range in the order j*a mod n (neighbours never created one after the other),
// at strides 2 MiB and 512 MiB plus a few lines of skew. Prints p5/p50/p95 cycles per walk.
// Build: nvcc -O2 -arch=sm_90 -o tlb_vmm tlb_vmm.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = 0; cuGetErrorName(r_, &s_); \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__); exit(1); } } while (0)
#define RK(x) do { cudaError_t r_ = (x); if (r_ != cudaSuccess) { \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, cudaGetErrorString(r_), __LINE__); exit(1); } } while (0)

static const unsigned STEPS = 256;

__global__ void init_chain(unsigned* base, unsigned nodes, unsigned stride_lines) {
  for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < nodes; k += gridDim.x * blockDim.x) {
    unsigned next = k + 1 == nodes ? 0 : k + 1;
    base[(size_t)k * stride_lines * 32] = next * stride_lines;
  }
}

__global__ void walk(const unsigned* base, unsigned warm, unsigned* out_lat, unsigned* out_end) {
  __shared__ unsigned lat[STEPS];
  __shared__ volatile unsigned idx[STEPS];  // volatile: the store stays between the clock reads
  if (threadIdx.x != 0) return;
  unsigned j = 0;
  for (unsigned k = 0; k < warm; ++k) j = __ldcg(base + (size_t)j * 32);
  for (unsigned k = 0; k < STEPS; ++k) {
    const unsigned* p = base + (size_t)j * 32;
    unsigned t0 = clock();
    j = __ldcg(p);
    idx[k] = j;  // depends on the load: the second clock read waits for it
    unsigned t1 = clock();
    lat[k] = t1 - t0;
  }
  for (unsigned k = 0; k < STEPS; ++k) out_lat[k] = lat[k];
  *out_end = j + idx[0] * 0;
}

static unsigned long long step_bytes(unsigned long long stride) {
  unsigned long long lines = stride / 128;
  for (unsigned long long m = 1;; m += 2) {
    unsigned long long l = lines + m;
    if (l % 3 && l % 5 && l % 7 && l % 11 && l % 13) return l * 128;
  }
}

static void run(const char* what, CUdeviceptr base, unsigned long long bytes, unsigned* d_lat, unsigned* d_end) {
  const unsigned long long strides[] = {2ull << 20, 512ull << 20};
  const unsigned counts[] = {1, 2, 4, 8, 12, 16, 17, 20, 24, 32, 33, 40, 48, 64, 65, 96, 128, 129, 144,
                             256, 512, 1024, 2048, 3072, 4096, 4097, 6144, 8192, 12288, 16384, 24576, 32768};
  for (unsigned long long stride : strides) {
    unsigned long long step = step_bytes(stride);
    for (unsigned nodes : counts) {
      if ((unsigned long long)nodes * step > bytes || nodes > 102400) break;
      unsigned stride_lines = (unsigned)(step / 128);
      init_chain<<<std::min(4096u, (nodes + 255) / 256), 256>>>((unsigned*)base, nodes, stride_lines);
      walk<<<1, 32>>>((const unsigned*)base, nodes, d_lat, d_end);
      RK(cudaDeviceSynchronize());
      std::vector<unsigned> lat(STEPS);
      RK(cudaMemcpy(lat.data(), d_lat, STEPS * 4, cudaMemcpyDeviceToHost));
      std::sort(lat.begin(), lat.end());
      printf("%s stride %llu MiB nodes %u span %.2f GiB: p5 %u p50 %u p95 %u cycles\n", what, stride >> 20, nodes,
             nodes * (double)step / (1ull << 30), lat[STEPS * 5 / 100], lat[STEPS / 2], lat[STEPS * 95 / 100]);
    }
  }
}

int main() {
  RK(cudaSetDevice(0));
  RK(cudaFree(0));
  CUdevice dev;
  CK(cuCtxGetDevice(&dev));
  size_t free_b = 0, total_b = 0;
  RK(cudaMemGetInfo(&free_b, &total_b));
  unsigned long long bytes = (free_b - std::max<size_t>(4ull << 30, total_b / 16)) & ~((1ull << 30) - 1);
  printf("device memory %.2f GiB, free %.2f GiB, region %.0f GiB\n", total_b / 1073741824.0, free_b / 1073741824.0,
         bytes / 1073741824.0);
  unsigned *d_lat, *d_end;
  RK(cudaMalloc(&d_lat, STEPS * 4));
  RK(cudaMalloc(&d_end, 4));

  // (a) plain
  void* plain = 0;
  RK(cudaMalloc(&plain, bytes));
  printf("plain cudaMalloc at %p\n", plain);
  run("plain", (CUdeviceptr)plain, bytes, d_lat, d_end);
  RK(cudaFree(plain));

  // (b) separately mapped 2 MiB chunks
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  unsigned long long n = bytes / gran;
  std::vector<CUmemGenericAllocationHandle> handles(n);
  for (unsigned long long k = 0; k < n; ++k) CK(cuMemCreate(&handles[k], gran, &prop, 0));
  CUdeviceptr base = 0;
  CK(cuMemAddressReserve(&base, n * gran, gran, 0, 0));
  unsigned long long a = (unsigned long long)(n * 0.618);
  auto gcd = [](unsigned long long x, unsigned long long y) { while (y) { unsigned long long t = x % y; x = y; y = t; } return x; };
  while (gcd(a, n) != 1 || a <= 1 || a >= n - 1) ++a;
  for (unsigned long long j = 0; j < n; ++j) CK(cuMemMap(base + j * gran, gran, 0, handles[j * a % n], 0));
  for (auto h : handles) CK(cuMemRelease(h));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(base, n * gran, &access, 1));
  printf("chunked: %llu chunks of %zu B, order j*%llu mod n, at 0x%llx\n", n, gran, a, (unsigned long long)base);
  run("chunked", base, n * gran, d_lat, d_end);
  for (unsigned long long j = 0; j < n; ++j) CK(cuMemUnmap(base + j * gran, gran));
  CK(cuMemAddressFree(base, n * gran));
  return 0;
}

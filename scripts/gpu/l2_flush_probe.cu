// Probes: whether an L2 flush by writes crowds out what is loaded after it. Backs:
// docs/decisions.md, "The L2 flush reads" (docs/evidence/2026-11-26-h100-h200-l2-flush/).
// Why would the line probe's chain A overflow the L2 well below the size sweep's onset? One thread fills A (one node per 64 B, in address order, as the tool's line probe
// does) after one of three flushes, then re-times A's first 8192 nodes: the share of them
// that are no longer near hits says whether A overflowed by itself.
//   write: one word written into every 128 B line of a buffer twice the L2 (the tool's flush)
//   write+read: the same, then every line of another buffer twice the L2 read (.cg)
//   read: only the read of that other buffer
// If the written lines are what crowds A out, A fits to a larger size after a read.
// Usage: l2_flush_probe (no arguments); prints one line per size and flush.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void write_lines(unsigned* buf, size_t lines) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < lines;
       i += (size_t)gridDim.x * blockDim.x)
    buf[i * 32] = (unsigned)i;
}

__global__ void read_lines(const unsigned* buf, size_t lines, unsigned* sink) {
  unsigned s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < lines;
       i += (size_t)gridDim.x * blockDim.x)
    s += __ldcg(buf + i * 32);
  if (s == 0x9e3779b9u) sink[0] = s;
}

// One thread: chase all `nodes` of A (element indices), then time the first `timed` again.
__global__ void fill_and_time(const unsigned* a, unsigned nodes, unsigned timed,
                              unsigned* lat) {
  __shared__ unsigned seen[8192];
  if (threadIdx.x || blockIdx.x) return;
  unsigned j = 0;
  for (unsigned k = 0; k < nodes; ++k) j = __ldcg(a + j);
  const unsigned keep = j;  // used below, so that the fill is not optimised away
  j = 0;
  for (unsigned k = 0; k < timed; ++k) {
    long long t0 = clock64();
    j = __ldcg(a + j);
    seen[k] = j;  // waits for the load
    long long t1 = clock64();
    lat[k] = (unsigned)(t1 - t0);
  }
  lat[timed] = seen[timed - 1] + keep;
}

int main() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  const size_t l2 = p.l2CacheSize;
  printf("%s, L2 %zu B\n", p.name, l2);
  const size_t flush_lines = 2 * l2 / 128;
  unsigned *f, *g, *sink, *lat, *a;
  CK(cudaMalloc(&f, flush_lines * 128));
  CK(cudaMalloc(&g, flush_lines * 128));
  CK(cudaMalloc(&sink, 4));
  const unsigned timed = 8192;
  CK(cudaMalloc(&lat, (timed + 1) * 4));
  const size_t max_bytes = 32ull << 20;
  CK(cudaMalloc(&a, max_bytes));
  CK(cudaMemset(g, 0, flush_lines * 128));  // written once, long before any fill
  std::vector<unsigned> host(max_bytes / 4), out(timed + 1);
  const char* names[3] = {"write", "write+read", "read"};
  for (int mib = 12; mib <= 30; mib += 2) {
    const size_t bytes = (size_t)mib << 20;
    const unsigned nodes = bytes / 64;
    for (unsigned i = 0; i < nodes; ++i) host[i * 16] = ((i + 1) % nodes) * 16;
    CK(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 2; ++rep) {
      for (int v = 0; v < 3; ++v) {
        if (v < 2) write_lines<<<p.multiProcessorCount * 4, 1024>>>(f, flush_lines);
        if (v > 0) read_lines<<<p.multiProcessorCount * 4, 1024>>>(g, flush_lines, sink);
        fill_and_time<<<1, 32>>>(a, nodes, timed, lat);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(out.data(), lat, (timed + 1) * 4, cudaMemcpyDeviceToHost));
        std::vector<unsigned> s(out.begin(), out.begin() + timed);
        std::sort(s.begin(), s.end());
        const unsigned p50 = s[timed / 2];
        const unsigned p5 = s[timed / 20];
        // A near hit is within 1.3 times the fastest loads' level.
        const unsigned cut = (unsigned)(1.3 * p5);
        size_t slow = std::count_if(out.begin(), out.begin() + timed,
                                    [&](unsigned x) { return x > cut; });
        size_t above400 = std::count_if(out.begin(), out.begin() + timed,
                                        [&](unsigned x) { return x > 400; });
        printf("A %2d MiB  %-10s rep %d: p5 %u p50 %u, %.1f %% of the first %u loads above %u, %.1f %% above 400\n",
               mib, names[v], rep, p5, p50, 100.0 * slow / timed, timed, cut,
               100.0 * above400 / timed);
      }
    }
  }
  return 0;
}

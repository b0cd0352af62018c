// Oracle of the host-link benchmark (docs/measurement.md, "Host links"): copies between
// pinned host memory and device memory with cudaMemcpyAsync, one direction at a time and
// both at once on two streams, each direction timed by its own stream's events; the median
// of the timed copies after one untimed, in GB/s (10^9 bytes per second). Also the same
// copies of pageable memory, and the PCIe peak of the link the driver reports.
// Usage: host_copy [device] [MiB] [repeats]   (defaults: 0, 16, 5; 256 MiB shows the
// plateau with per-copy overheads amortised)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Direction {
  void* dst; const void* src; cudaMemcpyKind kind; cudaStream_t stream;
  cudaEvent_t start, stop; std::vector<double> gbps;
};

// Runs the directions together `repeats + 1` times; the first round is untimed.
static void run(std::vector<Direction*> dirs, size_t bytes, int repeats) {
  for (int r = 0; r <= repeats; ++r) {
    for (Direction* d : dirs) {
      CK(cudaEventRecord(d->start, d->stream));
      CK(cudaMemcpyAsync(d->dst, d->src, bytes, d->kind, d->stream));
    }
    for (Direction* d : dirs) CK(cudaEventRecord(d->stop, d->stream));
    for (Direction* d : dirs) CK(cudaStreamSynchronize(d->stream));
    if (r == 0) continue;
    for (Direction* d : dirs) {
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, d->start, d->stop));
      d->gbps.push_back(bytes / (ms / 1e3) / 1e9);
    }
  }
}

int main(int argc, char** argv) {
  int device = argc > 1 ? std::atoi(argv[1]) : 0;
  size_t bytes = (size_t)(argc > 2 ? std::atoi(argv[2]) : 16) << 20;
  int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
  CK(cudaSetDevice(device));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, device));
  std::printf("device %d: %s, %zu MiB per copy, median of %d\n", device, prop.name,
              bytes >> 20, repeats);
  void *h_src, *h_dst, *d_src, *d_dst;
  CK(cudaHostAlloc(&h_src, bytes, cudaHostAllocPortable));
  CK(cudaHostAlloc(&h_dst, bytes, cudaHostAllocPortable));
  CK(cudaMalloc(&d_src, bytes));
  CK(cudaMalloc(&d_dst, bytes));
  CK(cudaMemset(d_src, 0x5a, bytes));
  std::vector<char> p_src(bytes, 0x5a), p_dst(bytes);
  cudaStream_t s[2];
  for (auto& x : s) CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  auto make = [&](void* dst, const void* src, cudaMemcpyKind kind, int stream) {
    Direction* d = new Direction{dst, src, kind, s[stream], nullptr, nullptr, {}};
    CK(cudaEventCreate(&d->start));
    CK(cudaEventCreate(&d->stop));
    return d;
  };
  struct Case { const char* name; std::vector<Direction*> dirs; };
  std::vector<Case> cases = {
    {"pinned h2d", {make(d_dst, h_src, cudaMemcpyHostToDevice, 0)}},
    {"pinned d2h", {make(h_dst, d_src, cudaMemcpyDeviceToHost, 1)}},
    {"pinned both", {make(d_dst, h_src, cudaMemcpyHostToDevice, 0),
                     make(h_dst, d_src, cudaMemcpyDeviceToHost, 1)}},
    {"pageable h2d", {make(d_dst, p_src.data(), cudaMemcpyHostToDevice, 0)}},
    {"pageable d2h", {make(p_dst.data(), d_src, cudaMemcpyDeviceToHost, 1)}},
  };
  for (Case& c : cases) {
    run(c.dirs, bytes, repeats);
    if (c.dirs.size() == 1) {
      std::printf("%-13s %7.2f GB/s\n", c.name, median(c.dirs[0]->gbps));
    } else {
      double a = median(c.dirs[0]->gbps), b = median(c.dirs[1]->gbps);
      std::printf("%-13s h2d %7.2f  d2h %7.2f  sum %7.2f GB/s\n", c.name, a, b, a + b);
    }
  }
  return 0;
}

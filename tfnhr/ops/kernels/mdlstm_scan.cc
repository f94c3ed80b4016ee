// The skewed MDLSTM scan of tfnhr.layers.mdlstm_scan as two compiled TensorFlow ops: the
// whole loop over columns runs in C++, forward and backward, instead of one TensorFlow op
// per arithmetic step per column.  The numbers are those of the TensorFlow-ops scan
// (`skewed_scan`, what `mdlstm_dense(..., kernel="ops")` runs), the reference the tests
// compare with.
//
// Layout (units-first, rows last), per column t and direction d a row-major [rows, N] block:
//   xin    [T, D, Kx, N]  raw input incl. a constant-1 channel (in_loop) or the precomputed
//                         core pre-activations W^T x + b (Kx = G = 5u)
//   mask   [T, D, 1, N]   cell validity (0/1)
//   up     [N]            0/1: row n has an upper neighbour (row n - 1)
//   w_top  [D, P, K]      loop weights of the peephole gates over [(x;) h1; h2; s1; s2]
//   w_bot  [D, G - P, Kb] loop weights of the other gates over [(x;) h1; h2] (Kb = K - 2u)
//   vo     [D, Q, u]      the output gates' memory weights
// Forward outputs h, s [T, D, u, N] (masked) and the saved activations acts [T, D, 7u, N]
// (layout of tfnhr.layers.mdlstm_cells).  Directions are independent and run in parallel on
// TensorFlow's intra-op threads.
//
// Matrix products: OpenBLAS (the scipy-openblas32 wheel's, one thread per call) unless built
// with -DTFNHR_EIGEN_GEMM, then Eigen's.  On the per-column shapes of the scan (a few hundred
// gate rows times 64-512 rows of N) OpenBLAS runs 1.2-3.8x faster than Eigen; see
// docs/lab/throughput.md (the products alone) and docs/results.md#mdlstm-layer-speed (whole layers).

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#ifndef TFNHR_EIGEN_GEMM
#include "cblas.h"
#endif
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace tfnhr {

using tensorflow::OpKernel;
using tensorflow::Status;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::errors::InvalidArgument;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

template <typename T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatrixMap = Eigen::Map<Matrix<T>>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const Matrix<T>>;
template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

enum class Cell { kLeakyLp, kLeakyLpNewState, kLstm };

Cell ParseCell(const std::string& name) {
  if (name == "lstm") return Cell::kLstm;
  if (name == "leaky_lp_new_state") return Cell::kLeakyLpNewState;
  return Cell::kLeakyLp;
}

// Gates seeing s1, s2 (P / u) and output gates (Q / u) per cell.
int PeepholeGates(Cell cell) { return cell == Cell::kLstm ? 3 : 2; }
int OutputGates(Cell cell) { return cell == Cell::kLstm ? 1 : 2; }

#ifndef TFNHR_EIGEN_GEMM
// The ops call OpenBLAS from TensorFlow's intra-op threads, one call per direction and
// column: each call must run on its calling thread alone.
const bool kOpenBlasOneThread = [] {
  scipy_openblas_set_num_threads(1);
  return true;
}();
#endif

// c [m, n] = op(a) op(b) + beta c, all row-major; op(a) is [m, k] (a stored [k, m] when
// trans_a), op(b) is [k, n] (b stored [n, k] when trans_b).  beta is 0 or 1.
template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, const T* b,
          T beta, T* c) {
#ifdef TFNHR_EIGEN_GEMM
  MatrixMap<T> out(c, m, n);
  ConstMatrixMap<T> a_map(a, trans_a ? k : m, trans_a ? m : k);
  ConstMatrixMap<T> b_map(b, trans_b ? n : k, trans_b ? k : n);
  auto product = [&](const auto& left, const auto& right) {
    if (beta == T(0)) {
      out.noalias() = left * right;
    } else {
      out.noalias() += left * right;
    }
  };
  if (trans_a && trans_b) {
    product(a_map.transpose(), b_map.transpose());
  } else if (trans_a) {
    product(a_map.transpose(), b_map);
  } else if (trans_b) {
    product(a_map, b_map.transpose());
  } else {
    product(a_map, b_map);
  }
#else
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const blasint lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if constexpr (std::is_same_v<T, float>) {
    scipy_cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, n);
  } else {
    scipy_cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, n);
  }
#endif
}

template <typename Derived>
auto Sigmoid(const Eigen::ArrayBase<Derived>& z) {
  return z.unaryExpr(Eigen::internal::scalar_logistic_op<typename Derived::Scalar>());
}

// Sizes shared by both ops.
struct ScanDims {
  int64_t steps, directions, kx, n, units, gates, peep, out_gates, k, kb;
  bool in_loop;
};

// Fills inp [K, N] for one column and direction: [(x;) h1; h2; s1; s2] where h1, s1 are the
// previous column's states (zero before the first) and h2, s2 their rows rolled down by one,
// times the upper-neighbour mask.
template <typename T>
void LoopInput(const ScanDims& dims, const T* x_t, const T* h_prev, const T* s_prev,
               const T* up, T* inp) {
  const int64_t n = dims.n, u = dims.units;
  T* out = inp;
  if (dims.in_loop) {
    std::memcpy(out, x_t, sizeof(T) * dims.kx * n);
    out += dims.kx * n;
  }
  for (const T* state : {h_prev, s_prev}) {  // [h1; h2], then [s1; s2]
    T* own = out;
    T* upper = out + u * n;
    if (state == nullptr) {
      std::fill(own, own + 2 * u * n, T(0));
    } else {
      std::memcpy(own, state, sizeof(T) * u * n);
      for (int64_t r = 0; r < u; ++r) {
        const T* row = state + r * n;
        T* dst = upper + r * n;
        dst[0] = row[n - 1] * up[0];
        for (int64_t i = 1; i < n; ++i) dst[i] = row[i - 1] * up[i];
      }
    }
    out += 2 * u * n;
  }
}

// One column of the cell's forward step.  z holds the core pre-activations [G, N]; s1, s2
// the predecessor memories [u, N]; writes y, s (unmasked) and acts [7u, N].
template <typename T>
void CellForward(Cell cell, int64_t u, int64_t n, const T* z, const T* s1_ptr,
                 const T* s2_ptr, const T* vo, T* y_ptr, T* s_ptr, T* acts) {
  const int64_t un = u * n;
  ConstArrayMap<T> s1(s1_ptr, un), s2(s2_ptr, un);
  ArrayMap<T> y(y_ptr, un), s(s_ptr, un);
  if (cell == Cell::kLstm) {
    ArrayMap<T> g(acts, 3 * un), a(acts + 3 * un, un), o(acts + 4 * un, un);
    g = Sigmoid(ConstArrayMap<T>(z, 3 * un));
    a = ConstArrayMap<T>(z + 3 * un, un).tanh();
    s = g.segment(0, un) * a + g.segment(un, un) * s1 + g.segment(2 * un, un) * s2;
    Gemm(false, false, u, n, u, vo, s_ptr, T(0), acts + 4 * un);
    o = Sigmoid(o + ConstArrayMap<T>(z + 4 * un, un));
    y = o * s.tanh();
    ArrayMap<T>(acts + 5 * un, un) = s1;
    ArrayMap<T>(acts + 6 * un, un) = s2;
    return;
  }
  // Leaky LP: acts = [i, l, a, o1, o2, sbar, s1 - s2].
  ArrayMap<T> il(acts, 2 * un), a(acts + 2 * un, un), o(acts + 3 * un, 2 * un),
      sbar(acts + 5 * un, un), diff(acts + 6 * un, un);
  il = Sigmoid(ConstArrayMap<T>(z, 2 * un));
  a = ConstArrayMap<T>(z + 2 * un, un).tanh();
  diff = s1 - s2;
  sbar = s2 + il.segment(un, un) * diff;
  s = sbar + il.segment(0, un) * (a - sbar);
  const T* memory = cell == Cell::kLeakyLpNewState ? s_ptr : acts + 5 * un;
  Gemm(false, false, 2 * u, n, u, vo, memory, T(0), acts + 3 * un);
  o = Sigmoid(o + ConstArrayMap<T>(z + 3 * un, 2 * un));
  y = (o.segment(0, un) * sbar + o.segment(un, un) * s).tanh();
}

// One column of the cell's backward step.  Given acts, the column's masked y, s and the
// gradients dy, ds (zero at invalid cells): writes dz [G, N], the direct gradients ds1, ds2
// [u, N] and adds this column's gradient to dvo [Q, u].  scratch: [2u, N].
template <typename T>
void CellBackward(Cell cell, int64_t u, int64_t n, const T* acts, const T* y_ptr,
                  const T* s_ptr, const T* dy_ptr, const T* ds_ptr, const T* vo, T* dz,
                  T* ds1_ptr, T* ds2_ptr, T* dvo, T* scratch) {
  const int64_t un = u * n;
  ConstArrayMap<T> y(y_ptr, un), s(s_ptr, un), dy(dy_ptr, un), ds_in(ds_ptr, un);
  ArrayMap<T> ds1(ds1_ptr, un), ds2(ds2_ptr, un), ds(scratch, un);
  if (cell == Cell::kLstm) {
    ConstArrayMap<T> g(acts, 3 * un), a(acts + 3 * un, un), o(acts + 4 * un, un),
        s1(acts + 5 * un, un), s2(acts + 6 * un, un);
    ArrayMap<T> ts(scratch + un, un);
    ArrayMap<T> dzo(dz + 4 * un, un);
    ts = s.tanh();
    dzo = dy * ts * o * (T(1) - o);
    Gemm(true, false, u, n, u, vo, dz + 4 * un, T(0), scratch);
    ds += ds_in + dy * o * (T(1) - ts * ts);
    auto i = g.segment(0, un), f1 = g.segment(un, un), f2 = g.segment(2 * un, un);
    ArrayMap<T>(dz, un) = ds * a * i * (T(1) - i);
    ArrayMap<T>(dz + un, un) = ds * s1 * f1 * (T(1) - f1);
    ArrayMap<T>(dz + 2 * un, un) = ds * s2 * f2 * (T(1) - f2);
    ArrayMap<T>(dz + 3 * un, un) = ds * i * (T(1) - a * a);
    Gemm(false, true, u, u, n, dz + 4 * un, s_ptr, T(1), dvo);
    ds1 = ds * f1;
    ds2 = ds * f2;
    return;
  }
  const bool new_state = cell == Cell::kLeakyLpNewState;
  ConstArrayMap<T> i(acts, un), l(acts + un, un), a(acts + 2 * un, un), o1(acts + 3 * un, un),
      o2(acts + 4 * un, un), sbar(acts + 5 * un, un), diff(acts + 6 * un, un);
  ArrayMap<T> dq(ds2_ptr, un);  // ds2 is written last: use it for dq until then
  ArrayMap<T> dm(scratch + un, un);
  dq = dy * (T(1) - y * y);
  ArrayMap<T>(dz + 3 * un, un) = dq * sbar * o1 * (T(1) - o1);
  ArrayMap<T>(dz + 4 * un, un) = dq * s * o2 * (T(1) - o2);
  const T* dzo = dz + 3 * un;  // [2u, N]
  Gemm(true, false, u, n, 2 * u, vo, dzo, T(0), scratch + un);
  const T* memory = new_state ? s_ptr : acts + 5 * un;
  Gemm(false, true, 2 * u, u, n, dzo, memory, T(1), dvo);
  ArrayMap<T> dsbar(ds1_ptr, un);  // becomes ds1 below
  dsbar = dq * o1;
  ds = ds_in + dq * o2;
  if (new_state) {
    ds += dm;
  } else {
    dsbar += dm;
  }
  dsbar += ds * (T(1) - i);
  ArrayMap<T>(dz, un) = ds * (a - sbar) * i * (T(1) - i);
  ArrayMap<T>(dz + un, un) = dsbar * diff * l * (T(1) - l);
  ArrayMap<T>(dz + 2 * un, un) = ds * i * (T(1) - a * a);
  ds2 = dsbar - dsbar * l;
  ds1 = dsbar * l;
}

Status CheckInputs(const Tensor& xin, const Tensor& mask, const Tensor& up, const Tensor& w_top,
                   const Tensor& w_bot, const Tensor& vo, Cell cell, bool in_loop,
                   ScanDims* dims) {
  if (xin.dims() != 4 || mask.dims() != 4 || up.dims() != 1 || w_top.dims() != 3 ||
      w_bot.dims() != 3 || vo.dims() != 3) {
    return InvalidArgument("mdlstm scan: wrong input ranks");
  }
  dims->in_loop = in_loop;
  dims->steps = xin.dim_size(0);
  dims->directions = xin.dim_size(1);
  dims->kx = xin.dim_size(2);
  dims->n = xin.dim_size(3);
  dims->units = vo.dim_size(2);
  dims->peep = w_top.dim_size(1);
  dims->gates = dims->peep + w_bot.dim_size(1);
  dims->out_gates = vo.dim_size(1);
  dims->k = w_top.dim_size(2);
  dims->kb = w_bot.dim_size(2);
  const int64_t u = dims->units;
  if (dims->gates != 5 * u || dims->peep != PeepholeGates(cell) * u ||
      dims->out_gates != OutputGates(cell) * u ||
      dims->k != (in_loop ? dims->kx : 0) + 4 * u || dims->kb != dims->k - 2 * u ||
      (!in_loop && dims->kx != dims->gates) || mask.dim_size(0) != dims->steps ||
      mask.dim_size(1) != dims->directions || mask.dim_size(2) != 1 ||
      mask.dim_size(3) != dims->n || up.dim_size(0) != dims->n ||
      w_top.dim_size(0) != dims->directions || w_bot.dim_size(0) != dims->directions ||
      vo.dim_size(0) != dims->directions) {
    return InvalidArgument("mdlstm scan: inconsistent input shapes");
  }
  return Status();
}

// Direction d's loop weights: (w_top [P, K], w_bot [G - P, Kb], vo [Q, u]).
template <typename T>
std::tuple<const T*, const T*, const T*> DirectionWeights(const ScanDims& dims,
                                                          const Tensor& w_top,
                                                          const Tensor& w_bot,
                                                          const Tensor& vo, int64_t d) {
  return {w_top.flat<T>().data() + d * dims.peep * dims.k,
          w_bot.flat<T>().data() + d * (dims.gates - dims.peep) * dims.kb,
          vo.flat<T>().data() + d * dims.out_gates * dims.units};
}

// Runs fn(d) for every direction on the intra-op threads.
template <typename Fn>
void ForEachDirection(OpKernelContext* context, int64_t directions, int64_t cost, Fn fn) {
  auto* workers = context->device()->tensorflow_cpu_worker_threads();
  tensorflow::Shard(workers->num_threads, workers->workers, directions, cost,
                    [&](int64_t begin, int64_t end) {
                      for (int64_t d = begin; d < end; ++d) fn(d);
                    });
}

// Reads the attributes both ops share.
class ScanOpBase : public OpKernel {
 public:
  explicit ScanOpBase(OpKernelConstruction* context) : OpKernel(context) {
    std::string cell;
    OP_REQUIRES_OK(context, context->GetAttr("cell", &cell));
    OP_REQUIRES_OK(context, context->GetAttr("in_loop", &in_loop_));
    cell_ = ParseCell(cell);
  }

 protected:
  Cell cell_;
  bool in_loop_;
};

template <typename T>
class ScanForwardOp : public ScanOpBase {
 public:
  using ScanOpBase::ScanOpBase;

  void Compute(OpKernelContext* context) override {
    const Tensor &xin = context->input(0), &mask = context->input(1), &up = context->input(2),
                 &w_top = context->input(3), &w_bot = context->input(4), &vo = context->input(5);
    ScanDims dims;
    OP_REQUIRES_OK(context, CheckInputs(xin, mask, up, w_top, w_bot, vo, cell_, in_loop_, &dims));
    const int64_t steps = dims.steps, dirs = dims.directions, u = dims.units, n = dims.n;
    Tensor *h = nullptr, *s = nullptr, *acts = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({steps, dirs, u, n}), &h));
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({steps, dirs, u, n}), &s));
    OP_REQUIRES_OK(context,
                   context->allocate_output(2, TensorShape({steps, dirs, 7 * u, n}), &acts));
    const T *x_all = xin.flat<T>().data(), *m_all = mask.flat<T>().data(),
            *up_mask = up.flat<T>().data();
    T *h_all = h->flat<T>().data(), *s_all = s->flat<T>().data(),
      *acts_all = acts->flat<T>().data();
    const int64_t cost = steps * n * (dims.gates * dims.k + 40 * u);
    ForEachDirection(context, dirs, cost, [&](int64_t d) {
      const auto [wt, wb, vo_d] = DirectionWeights<T>(dims, w_top, w_bot, vo, d);
      std::vector<T> inp(dims.k * n), z(dims.gates * n);
      const int64_t s_rows = (in_loop_ ? dims.kx : 0) + 2 * u;  // s1 starts here in inp
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t col = (t * dirs + d);
        const T* x_t = x_all + col * dims.kx * n;
        const T* h_prev = t ? h_all + ((t - 1) * dirs + d) * u * n : nullptr;
        const T* s_prev = t ? s_all + ((t - 1) * dirs + d) * u * n : nullptr;
        LoopInput(dims, x_t, h_prev, s_prev, up_mask, inp.data());
        Gemm(false, false, dims.peep, n, dims.k, wt, inp.data(), T(0), z.data());
        Gemm(false, false, dims.gates - dims.peep, n, dims.kb, wb, inp.data(), T(0),
             z.data() + dims.peep * n);
        if (!in_loop_) {
          ArrayMap<T>(z.data(), dims.gates * n) += ConstArrayMap<T>(x_t, dims.gates * n);
        }
        T* y = h_all + col * u * n;
        T* s_new = s_all + col * u * n;
        CellForward(cell_, u, n, z.data(), inp.data() + s_rows * n,
                    inp.data() + (s_rows + u) * n, vo_d, y, s_new, acts_all + col * 7 * u * n);
        const T* m_t = m_all + col * n;
        for (int64_t r = 0; r < u; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            y[r * n + i] *= m_t[i];
            s_new[r * n + i] *= m_t[i];
          }
        }
      }
    });
  }
};

template <typename T>
class ScanBackwardOp : public ScanOpBase {
 public:
  using ScanOpBase::ScanOpBase;

  void Compute(OpKernelContext* context) override {
    const Tensor &dh = context->input(0), &xin = context->input(1), &mask = context->input(2),
                 &up = context->input(3), &w_top = context->input(4),
                 &w_bot = context->input(5), &vo = context->input(6), &h = context->input(7),
                 &s = context->input(8), &acts = context->input(9);
    ScanDims dims;
    OP_REQUIRES_OK(context, CheckInputs(xin, mask, up, w_top, w_bot, vo, cell_, in_loop_, &dims));
    const int64_t steps = dims.steps, dirs = dims.directions, u = dims.units, n = dims.n;
    const TensorShape state_shape({steps, dirs, u, n});
    OP_REQUIRES(context,
                dh.shape() == state_shape && h.shape() == state_shape &&
                    s.shape() == state_shape &&
                    acts.shape() == TensorShape({steps, dirs, 7 * u, n}),
                InvalidArgument("mdlstm scan backward: inconsistent saved shapes"));
    Tensor *dxin = nullptr, *dwt = nullptr, *dwb = nullptr, *dvo = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, xin.shape(), &dxin));
    OP_REQUIRES_OK(context, context->allocate_output(1, vo.shape(), &dvo));
    OP_REQUIRES_OK(context, context->allocate_output(2, w_top.shape(), &dwt));
    OP_REQUIRES_OK(context, context->allocate_output(3, w_bot.shape(), &dwb));
    dvo->flat<T>().setZero();
    dwt->flat<T>().setZero();
    dwb->flat<T>().setZero();
    const T *x_all = xin.flat<T>().data(), *m_all = mask.flat<T>().data(),
            *up_mask = up.flat<T>().data(), *dh_all = dh.flat<T>().data(),
            *h_all = h.flat<T>().data(), *s_all = s.flat<T>().data(),
            *acts_all = acts.flat<T>().data();
    T* dx_all = dxin->flat<T>().data();
    const int64_t cost = steps * n * (3 * dims.gates * dims.k + 60 * u);
    const int64_t kx = in_loop_ ? dims.kx : 0, g_bot = dims.gates - dims.peep;
    ForEachDirection(context, dirs, cost, [&](int64_t d) {
      const auto [wt, wb, vo_d] = DirectionWeights<T>(dims, w_top, w_bot, vo, d);
      T* dwt_d = dwt->flat<T>().data() + d * dims.peep * dims.k;
      T* dwb_d = dwb->flat<T>().data() + d * g_bot * dims.kb;
      T* dvo_d = dvo->flat<T>().data() + d * dims.out_gates * u;
      const int64_t un = u * n;
      std::vector<T> gh(un, T(0)), gs(un, T(0)), dy(un), ds(un), ds1(un), ds2(un),
          scratch(2 * un), dz(dims.gates * n), inp(dims.k * n), dinp(dims.k * n);
      for (int64_t t = steps - 1; t >= 0; --t) {
        const int64_t col = t * dirs + d;
        const T* m_t = m_all + col * n;
        const T* dh_t = dh_all + col * un;
        for (int64_t r = 0; r < u; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            dy[r * n + i] = (gh[r * n + i] + dh_t[r * n + i]) * m_t[i];
            ds[r * n + i] = gs[r * n + i] * m_t[i];
          }
        }
        CellBackward(cell_, u, n, acts_all + col * 7 * un, h_all + col * un, s_all + col * un,
                     dy.data(), ds.data(), vo_d, dz.data(), ds1.data(), ds2.data(), dvo_d,
                     scratch.data());
        const T* h_prev = t ? h_all + ((t - 1) * dirs + d) * un : nullptr;
        const T* s_prev = t ? s_all + ((t - 1) * dirs + d) * un : nullptr;
        const T* x_t = x_all + col * dims.kx * n;
        LoopInput(dims, x_t, h_prev, s_prev, up_mask, inp.data());
        const T *dz_top = dz.data(), *dz_bot = dz.data() + dims.peep * n;  // [P, N], [G - P, N]
        Gemm(true, false, dims.k, n, dims.peep, wt, dz_top, T(0), dinp.data());
        Gemm(true, false, dims.kb, n, g_bot, wb, dz_bot, T(1), dinp.data());
        Gemm(false, true, dims.peep, dims.k, n, dz_top, inp.data(), T(1), dwt_d);
        Gemm(false, true, g_bot, dims.kb, n, dz_bot, inp.data(), T(1), dwb_d);
        T* dx_t = dx_all + col * dims.kx * n;
        if (in_loop_) {
          std::memcpy(dx_t, dinp.data(), sizeof(T) * kx * n);
        } else {
          std::memcpy(dx_t, dz.data(), sizeof(T) * dims.gates * n);
        }
        // gh = dh1 + roll(dh2 * up, -1); gs = ds1 + ds1m + roll((ds2 + ds2m) * up, -1).
        const T* dh1 = dinp.data() + kx * n;
        const T* dh2 = dh1 + un;
        const T* ds1m = dh2 + un;
        const T* ds2m = ds1m + un;
        for (int64_t r = 0; r < u; ++r) {
          const int64_t o = r * n;
          for (int64_t i = 0; i < n; ++i) {
            const int64_t next = i + 1 < n ? i + 1 : 0;
            gh[o + i] = dh1[o + i] + dh2[o + next] * up_mask[next];
            gs[o + i] = ds1[o + i] + ds1m[o + i] + (ds2[o + next] + ds2m[o + next]) * up_mask[next];
          }
        }
      }
    });
  }
};

}  // namespace tfnhr

using tensorflow::Status;

REGISTER_OP("TfnhrMdlstmScanForward")
    .Input("xin: T")
    .Input("mask: T")
    .Input("up_mask: T")
    .Input("w_top: T")
    .Input("w_bot: T")
    .Input("output_peephole: T")
    .Output("h: T")
    .Output("s: T")
    .Output("acts: T")
    .Attr("T: {float, double}")
    .Attr("cell: {'leaky_lp', 'leaky_lp_new_state', 'lstm'}")
    .Attr("in_loop: bool")
    .SetShapeFn([](tfnhr::InferenceContext* c) {
      tfnhr::ShapeHandle xin, vo;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &xin));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(5), 3, &vo));
      auto units = c->Dim(vo, 2);
      tensorflow::shape_inference::DimensionHandle acts_rows;
      TF_RETURN_IF_ERROR(c->Multiply(units, 7, &acts_rows));
      auto state = c->MakeShape({c->Dim(xin, 0), c->Dim(xin, 1), units, c->Dim(xin, 3)});
      c->set_output(0, state);
      c->set_output(1, state);
      c->set_output(2, c->MakeShape({c->Dim(xin, 0), c->Dim(xin, 1), acts_rows, c->Dim(xin, 3)}));
      return Status();
    });

REGISTER_OP("TfnhrMdlstmScanBackward")
    .Input("dh: T")
    .Input("xin: T")
    .Input("mask: T")
    .Input("up_mask: T")
    .Input("w_top: T")
    .Input("w_bot: T")
    .Input("output_peephole: T")
    .Input("h: T")
    .Input("s: T")
    .Input("acts: T")
    .Output("dxin: T")
    .Output("doutput_peephole: T")
    .Output("dw_top: T")
    .Output("dw_bot: T")
    .Attr("T: {float, double}")
    .Attr("cell: {'leaky_lp', 'leaky_lp_new_state', 'lstm'}")
    .Attr("in_loop: bool")
    .SetShapeFn([](tfnhr::InferenceContext* c) {
      c->set_output(0, c->input(1));
      c->set_output(1, c->input(6));
      c->set_output(2, c->input(4));
      c->set_output(3, c->input(5));
      return Status();
    });

#define TFNHR_REGISTER(T)                                                                 \
  REGISTER_KERNEL_BUILDER(                                                                \
      Name("TfnhrMdlstmScanForward").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
      tfnhr::ScanForwardOp<T>);                                                           \
  REGISTER_KERNEL_BUILDER(                                                                \
      Name("TfnhrMdlstmScanBackward").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
      tfnhr::ScanBackwardOp<T>);

TFNHR_REGISTER(float)
TFNHR_REGISTER(double)

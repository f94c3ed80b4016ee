// The multi-directional MDLSTM of tfnhr.layers.mdlstm_scan as two compiled TensorFlow ops:
// the direction flips, the skew, the whole loop over skewed columns and the unskew run in C++,
// forward and backward, instead of one TensorFlow op per arithmetic step per column.  The
// numbers are those of the TensorFlow-ops scan (`mdlstm_dense(..., kernel="ops")`), which is
// the reference the tests compare with.
//
// Image layout in and out, column layout inside.  Inputs:
//   x      [Dx, B, H, W, Kin] in_loop: the raw input (Dx = 1, shared by all directions; the
//                             op appends the constant-1 bias channel); else the precomputed
//                             core pre-activations x W_d + b_d per direction (Dx = D, Kin = G)
//   mask   [B, H, W]          cell validity (0/1)
//   w_top  [D, P, K]          loop weights of the peephole gates over [(x; 1;) h1; h2; s1; s2]
//   w_bot  [D, G - P, Kb]     loop weights of the other gates over [(x; 1;) h1; h2]
//   vo     [D, Q, u]          the output gates' memory weights
// Direction d scans the image flipped as DIRECTION_FLIPS says (1: along W, 2: along H, 3: both),
// skewed (row r shifted right by r): column t, row n = b H + r holds pixel (r, t - r) of the
// flipped image; rows n with n % H == 0 have no upper neighbour.  Per column and direction the
// blocks are row-major [rows, N], N = B H.  Outputs: y [B, H, W, D u] (directions concatenated,
// each in the input orientation, masked) and the residuals of the backward pass, h, s
// [T, D, u, N] (masked) and acts [T, D, 7u, N] (layout of tfnhr.layers.mdlstm_cells).
// Directions are independent and run in parallel on TensorFlow's intra-op threads.

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace tfnhr {

using tensorflow::DEVICE_CPU;
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

template <typename Derived>
auto Sigmoid(const Eigen::ArrayBase<Derived>& z) {
  return z.unaryExpr(Eigen::internal::scalar_logistic_op<typename Derived::Scalar>());
}

// Sizes shared by both ops.
struct ScanDims {
  int64_t batch, height, width, steps, n, directions, units, gates, peep, out_gates;
  int64_t x_dirs;  // 1 (in_loop: the raw input is shared) or D (precomputed per direction)
  int64_t kin;     // channels of x per pixel
  int64_t kx;      // rows of a column's input block: kin + 1 (in_loop) or G
  int64_t k, kb;   // rows of the loop matmul's input, all gates / the non-peephole gates
  bool in_loop;
};

// The pixel of [B, H, W] that skewed cell (column t, row r of image b) of direction d holds,
// or -1 for the skew's empty triangles.
inline int64_t SourcePixel(const ScanDims& dims, int64_t d, int64_t t, int64_t b, int64_t r) {
  const int64_t w = t - r;
  if (w < 0 || w >= dims.width) return -1;
  const int64_t row = d >= 2 ? dims.height - 1 - r : r;
  const int64_t col = (d == 1 || d == 3) ? dims.width - 1 - w : w;
  return (b * dims.height + row) * dims.width + col;
}

// Column t of direction d: its input block x_t [kx, N] (zero in the empty triangles; in_loop:
// the constant-1 channel last) and its mask m_t [N].
template <typename T>
void GatherColumn(const ScanDims& dims, int64_t d, int64_t t, const T* x, const T* mask, T* x_t,
                  T* m_t) {
  const int64_t n = dims.n, kin = dims.kin;
  const T* x_d = x + (dims.x_dirs == 1 ? 0 : d) * dims.batch * dims.height * dims.width * kin;
  for (int64_t b = 0; b < dims.batch; ++b) {
    for (int64_t r = 0; r < dims.height; ++r) {
      const int64_t row = b * dims.height + r;
      const int64_t pixel = SourcePixel(dims, d, t, b, r);
      if (pixel < 0) {
        m_t[row] = T(0);
        for (int64_t k = 0; k < dims.kx; ++k) x_t[k * n + row] = T(0);
        continue;
      }
      m_t[row] = mask[pixel];
      const T* source = x_d + pixel * kin;
      for (int64_t k = 0; k < kin; ++k) x_t[k * n + row] = source[k];
      if (dims.in_loop) x_t[kin * n + row] = T(1);
    }
  }
}

// Fills inp [K, N] for one column and direction: [(x_t;) h1; h2; s1; s2] where h1, s1 are the
// previous column's states (zero before the first) and h2, s2 their rows rolled down by one,
// zero where a row has no upper neighbour.
template <typename T>
void LoopInput(const ScanDims& dims, const T* x_t, const T* h_prev, const T* s_prev, T* inp) {
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
        for (int64_t i = 0; i < n; ++i) dst[i] = i % dims.height ? row[i - 1] : T(0);
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
    MatrixMap<T>(acts + 4 * un, u, n).noalias() =
        ConstMatrixMap<T>(vo, u, u) * ConstMatrixMap<T>(s_ptr, u, n);
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
  MatrixMap<T>(acts + 3 * un, 2 * u, n).noalias() =
      ConstMatrixMap<T>(vo, 2 * u, u) * ConstMatrixMap<T>(memory, u, n);
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
    MatrixMap<T>(scratch, u, n).noalias() =
        ConstMatrixMap<T>(vo, u, u).transpose() * ConstMatrixMap<T>(dz + 4 * un, u, n);
    ds += ds_in + dy * o * (T(1) - ts * ts);
    auto i = g.segment(0, un), f1 = g.segment(un, un), f2 = g.segment(2 * un, un);
    ArrayMap<T>(dz, un) = ds * a * i * (T(1) - i);
    ArrayMap<T>(dz + un, un) = ds * s1 * f1 * (T(1) - f1);
    ArrayMap<T>(dz + 2 * un, un) = ds * s2 * f2 * (T(1) - f2);
    ArrayMap<T>(dz + 3 * un, un) = ds * i * (T(1) - a * a);
    MatrixMap<T>(dvo, u, u).noalias() +=
        ConstMatrixMap<T>(dz + 4 * un, u, n) * ConstMatrixMap<T>(s_ptr, u, n).transpose();
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
  ConstMatrixMap<T> dzo(dz + 3 * un, 2 * u, n);
  MatrixMap<T>(scratch + un, u, n).noalias() = ConstMatrixMap<T>(vo, 2 * u, u).transpose() * dzo;
  const T* memory = new_state ? s_ptr : acts + 5 * un;
  MatrixMap<T>(dvo, 2 * u, u).noalias() += dzo * ConstMatrixMap<T>(memory, u, n).transpose();
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

Status ReadDims(const Tensor& x, const Tensor& mask, const Tensor& w_top, const Tensor& w_bot,
                const Tensor& vo, Cell cell, bool in_loop, ScanDims* dims) {
  if (x.dims() != 5 || mask.dims() != 3 || w_top.dims() != 3 || w_bot.dims() != 3 ||
      vo.dims() != 3) {
    return InvalidArgument("mdlstm scan: wrong input ranks");
  }
  dims->in_loop = in_loop;
  dims->x_dirs = x.dim_size(0);
  dims->batch = x.dim_size(1);
  dims->height = x.dim_size(2);
  dims->width = x.dim_size(3);
  dims->kin = x.dim_size(4);
  dims->steps = dims->width + dims->height - 1;
  dims->n = dims->batch * dims->height;
  dims->directions = w_top.dim_size(0);
  dims->units = vo.dim_size(2);
  dims->peep = w_top.dim_size(1);
  dims->gates = dims->peep + w_bot.dim_size(1);
  dims->out_gates = vo.dim_size(1);
  dims->kx = in_loop ? dims->kin + 1 : dims->kin;
  dims->k = w_top.dim_size(2);
  dims->kb = w_bot.dim_size(2);
  const int64_t u = dims->units;
  if (dims->batch < 1 || dims->height < 1 || dims->width < 1 || dims->gates != 5 * u ||
      dims->peep != PeepholeGates(cell) * u || dims->out_gates != OutputGates(cell) * u ||
      dims->k != (in_loop ? dims->kx : 0) + 4 * u || dims->kb != dims->k - 2 * u ||
      (!in_loop && dims->kin != dims->gates) ||
      dims->x_dirs != (in_loop ? 1 : dims->directions) || mask.dim_size(0) != dims->batch ||
      mask.dim_size(1) != dims->height || mask.dim_size(2) != dims->width ||
      w_bot.dim_size(0) != dims->directions || vo.dim_size(0) != dims->directions) {
    return InvalidArgument("mdlstm scan: inconsistent input shapes");
  }
  return Status();
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
    const Tensor &x = context->input(0), &mask = context->input(1), &w_top = context->input(2),
                 &w_bot = context->input(3), &vo = context->input(4);
    ScanDims dims;
    OP_REQUIRES_OK(context, ReadDims(x, mask, w_top, w_bot, vo, cell_, in_loop_, &dims));
    const int64_t steps = dims.steps, dirs = dims.directions, u = dims.units, n = dims.n;
    const int64_t un = u * n, g_bot = dims.gates - dims.peep;
    Tensor *y = nullptr, *h = nullptr, *s = nullptr, *acts = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(
                                0, TensorShape({dims.batch, dims.height, dims.width, dirs * u}), &y));
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({steps, dirs, u, n}), &h));
    OP_REQUIRES_OK(context, context->allocate_output(2, TensorShape({steps, dirs, u, n}), &s));
    OP_REQUIRES_OK(context,
                   context->allocate_output(3, TensorShape({steps, dirs, 7 * u, n}), &acts));
    const T *x_all = x.flat<T>().data(), *mask_all = mask.flat<T>().data();
    T *y_all = y->flat<T>().data(), *h_all = h->flat<T>().data(), *s_all = s->flat<T>().data(),
      *acts_all = acts->flat<T>().data();
    const int64_t cost = steps * n * (dims.gates * dims.k + 40 * u);
    ForEachDirection(context, dirs, cost, [&](int64_t d) {
      const T* wt = w_top.flat<T>().data() + d * dims.peep * dims.k;
      const T* wb = w_bot.flat<T>().data() + d * g_bot * dims.kb;
      const T* vo_d = vo.flat<T>().data() + d * dims.out_gates * u;
      std::vector<T> x_t(dims.kx * n), m_t(n), inp(dims.k * n), z(dims.gates * n);
      const int64_t s_rows = (in_loop_ ? dims.kx : 0) + 2 * u;  // s1 starts here in inp
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t col = t * dirs + d;
        GatherColumn(dims, d, t, x_all, mask_all, x_t.data(), m_t.data());
        const T* h_prev = t ? h_all + (col - dirs) * un : nullptr;
        const T* s_prev = t ? s_all + (col - dirs) * un : nullptr;
        LoopInput(dims, x_t.data(), h_prev, s_prev, inp.data());
        MatrixMap<T>(z.data(), dims.peep, n).noalias() =
            ConstMatrixMap<T>(wt, dims.peep, dims.k) * ConstMatrixMap<T>(inp.data(), dims.k, n);
        MatrixMap<T>(z.data() + dims.peep * n, g_bot, n).noalias() =
            ConstMatrixMap<T>(wb, g_bot, dims.kb) * ConstMatrixMap<T>(inp.data(), dims.kb, n);
        if (!in_loop_) {
          ArrayMap<T>(z.data(), dims.gates * n) += ConstArrayMap<T>(x_t.data(), dims.gates * n);
        }
        T* h_t = h_all + col * un;
        T* s_t = s_all + col * un;
        CellForward(cell_, u, n, z.data(), inp.data() + s_rows * n, inp.data() + (s_rows + u) * n,
                    vo_d, h_t, s_t, acts_all + col * 7 * un);
        for (int64_t r = 0; r < u; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            h_t[r * n + i] *= m_t[i];
            s_t[r * n + i] *= m_t[i];
          }
        }
        for (int64_t b = 0; b < dims.batch; ++b) {  // unskew, flip back, into y
          for (int64_t r = 0; r < dims.height; ++r) {
            const int64_t pixel = SourcePixel(dims, d, t, b, r);
            if (pixel < 0) continue;
            T* out = y_all + pixel * dirs * u + d * u;
            const int64_t row = b * dims.height + r;
            for (int64_t j = 0; j < u; ++j) out[j] = h_t[j * n + row];
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
    const Tensor &dy = context->input(0), &x = context->input(1), &mask = context->input(2),
                 &w_top = context->input(3), &w_bot = context->input(4), &vo = context->input(5),
                 &h = context->input(6), &s = context->input(7), &acts = context->input(8);
    ScanDims dims;
    OP_REQUIRES_OK(context, ReadDims(x, mask, w_top, w_bot, vo, cell_, in_loop_, &dims));
    const int64_t steps = dims.steps, dirs = dims.directions, u = dims.units, n = dims.n;
    const int64_t un = u * n, g_bot = dims.gates - dims.peep, kin = dims.kin;
    const TensorShape state_shape({steps, dirs, u, n});
    OP_REQUIRES(context,
                dy.shape() == TensorShape({dims.batch, dims.height, dims.width, dirs * u}) &&
                    h.shape() == state_shape && s.shape() == state_shape &&
                    acts.shape() == TensorShape({steps, dirs, 7 * u, n}),
                InvalidArgument("mdlstm scan backward: inconsistent saved shapes"));
    Tensor *dx = nullptr, *dwt = nullptr, *dwb = nullptr, *dvo = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &dx));
    OP_REQUIRES_OK(context, context->allocate_output(1, vo.shape(), &dvo));
    OP_REQUIRES_OK(context, context->allocate_output(2, w_top.shape(), &dwt));
    OP_REQUIRES_OK(context, context->allocate_output(3, w_bot.shape(), &dwb));
    dvo->flat<T>().setZero();
    dwt->flat<T>().setZero();
    dwb->flat<T>().setZero();
    // in_loop: every direction's input gradient lands on the shared input; each direction
    // writes its own copy (no races between threads), summed at the end.
    const int64_t pixels = dims.batch * dims.height * dims.width;
    Tensor dx_directions;
    if (in_loop_) {
      OP_REQUIRES_OK(context, context->allocate_temp(tensorflow::DataTypeToEnum<T>::value,
                                                     TensorShape({dirs, pixels * kin}),
                                                     &dx_directions));
    }
    T* dx_base = in_loop_ ? dx_directions.flat<T>().data() : dx->flat<T>().data();
    const T *x_all = x.flat<T>().data(), *mask_all = mask.flat<T>().data(),
            *dy_all = dy.flat<T>().data(), *h_all = h.flat<T>().data(),
            *s_all = s.flat<T>().data(), *acts_all = acts.flat<T>().data();
    const int64_t cost = steps * n * (3 * dims.gates * dims.k + 60 * u);
    const int64_t kx_rows = in_loop_ ? dims.kx : 0;
    ForEachDirection(context, dirs, cost, [&](int64_t d) {
      const T* wt = w_top.flat<T>().data() + d * dims.peep * dims.k;
      const T* wb = w_bot.flat<T>().data() + d * g_bot * dims.kb;
      const T* vo_d = vo.flat<T>().data() + d * dims.out_gates * u;
      T* dwt_d = dwt->flat<T>().data() + d * dims.peep * dims.k;
      T* dwb_d = dwb->flat<T>().data() + d * g_bot * dims.kb;
      T* dvo_d = dvo->flat<T>().data() + d * dims.out_gates * u;
      T* dx_d = dx_base + d * pixels * kin;
      std::vector<T> gh(un, T(0)), gs(un, T(0)), dh(un), ds(un), ds1(un), ds2(un),
          scratch(2 * un), dz(dims.gates * n), x_t(dims.kx * n), m_t(n), inp(dims.k * n),
          dinp(dims.k * n);
      for (int64_t t = steps - 1; t >= 0; --t) {
        const int64_t col = t * dirs + d;
        GatherColumn(dims, d, t, x_all, mask_all, x_t.data(), m_t.data());
        for (int64_t b = 0; b < dims.batch; ++b) {  // this column's output gradient
          for (int64_t r = 0; r < dims.height; ++r) {
            const int64_t pixel = SourcePixel(dims, d, t, b, r);
            const int64_t row = b * dims.height + r;
            if (pixel < 0) {
              for (int64_t j = 0; j < u; ++j) dh[j * n + row] = T(0);
              continue;
            }
            const T* in = dy_all + pixel * dirs * u + d * u;
            for (int64_t j = 0; j < u; ++j) dh[j * n + row] = in[j];
          }
        }
        for (int64_t r = 0; r < u; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            dh[r * n + i] = (gh[r * n + i] + dh[r * n + i]) * m_t[i];
            ds[r * n + i] = gs[r * n + i] * m_t[i];
          }
        }
        CellBackward(cell_, u, n, acts_all + col * 7 * un, h_all + col * un, s_all + col * un,
                     dh.data(), ds.data(), vo_d, dz.data(), ds1.data(), ds2.data(), dvo_d,
                     scratch.data());
        const T* h_prev = t ? h_all + (col - dirs) * un : nullptr;
        const T* s_prev = t ? s_all + (col - dirs) * un : nullptr;
        LoopInput(dims, x_t.data(), h_prev, s_prev, inp.data());
        ConstMatrixMap<T> dz_top(dz.data(), dims.peep, n);
        ConstMatrixMap<T> dz_bot(dz.data() + dims.peep * n, g_bot, n);
        MatrixMap<T> dinp_m(dinp.data(), dims.k, n);
        dinp_m.noalias() = ConstMatrixMap<T>(wt, dims.peep, dims.k).transpose() * dz_top;
        dinp_m.topRows(dims.kb).noalias() +=
            ConstMatrixMap<T>(wb, g_bot, dims.kb).transpose() * dz_bot;
        MatrixMap<T>(dwt_d, dims.peep, dims.k).noalias() +=
            dz_top * ConstMatrixMap<T>(inp.data(), dims.k, n).transpose();
        MatrixMap<T>(dwb_d, g_bot, dims.kb).noalias() +=
            dz_bot * ConstMatrixMap<T>(inp.data(), dims.kb, n).transpose();
        // The input gradient (in_loop: of the raw channels, not of the constant one; else of
        // the precomputed pre-activations), unskewed and flipped back.
        const T* dcol = in_loop_ ? dinp.data() : dz.data();
        for (int64_t b = 0; b < dims.batch; ++b) {
          for (int64_t r = 0; r < dims.height; ++r) {
            const int64_t pixel = SourcePixel(dims, d, t, b, r);
            if (pixel < 0) continue;
            const int64_t row = b * dims.height + r;
            T* out = dx_d + pixel * kin;
            for (int64_t k = 0; k < kin; ++k) out[k] = dcol[k * n + row];
          }
        }
        // gh = dh1 + roll(dh2, -1), gs = ds1 + ds1m + roll(ds2 + ds2m, -1), rows without
        // an upper neighbour contributing nothing.
        const T* dh1 = dinp.data() + kx_rows * n;
        const T* dh2 = dh1 + un;
        const T* ds1m = dh2 + un;
        const T* ds2m = ds1m + un;
        for (int64_t r = 0; r < u; ++r) {
          const int64_t o = r * n;
          for (int64_t i = 0; i < n; ++i) {
            const bool below = i + 1 < n && (i + 1) % dims.height != 0;
            gh[o + i] = dh1[o + i] + (below ? dh2[o + i + 1] : T(0));
            gs[o + i] = ds1[o + i] + ds1m[o + i] + (below ? ds2[o + i + 1] + ds2m[o + i + 1] : T(0));
          }
        }
      }
    });
    if (in_loop_) {
      auto total = dx->flat<T>();
      const T* parts = dx_directions.flat<T>().data();
      ConstArrayMap<T> first(parts, pixels * kin);
      ArrayMap<T> sum(total.data(), pixels * kin);
      sum = first;
      for (int64_t d = 1; d < dirs; ++d) sum += ConstArrayMap<T>(parts + d * pixels * kin, pixels * kin);
    }
  }
};

}  // namespace tfnhr

using tensorflow::Status;

REGISTER_OP("TfnhrMdlstmScanForward")
    .Input("x: T")
    .Input("mask: T")
    .Input("w_top: T")
    .Input("w_bot: T")
    .Input("output_peephole: T")
    .Output("y: T")
    .Output("h: T")
    .Output("s: T")
    .Output("acts: T")
    .Attr("T: {float, double}")
    .Attr("cell: {'leaky_lp', 'leaky_lp_new_state', 'lstm'}")
    .Attr("in_loop: bool")
    .SetShapeFn([](tfnhr::InferenceContext* c) {
      tfnhr::ShapeHandle x, w_top, vo;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 5, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 3, &w_top));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 3, &vo));
      auto units = c->Dim(vo, 2);
      auto directions = c->Dim(w_top, 0);
      tensorflow::shape_inference::DimensionHandle channels, acts_rows, steps, rows, skew;
      TF_RETURN_IF_ERROR(c->Multiply(directions, units, &channels));
      TF_RETURN_IF_ERROR(c->Multiply(units, 7, &acts_rows));
      TF_RETURN_IF_ERROR(c->Add(c->Dim(x, 3), c->Dim(x, 2), &skew));
      TF_RETURN_IF_ERROR(c->Subtract(skew, 1, &steps));
      TF_RETURN_IF_ERROR(c->Multiply(c->Dim(x, 1), c->Dim(x, 2), &rows));
      c->set_output(0, c->MakeShape({c->Dim(x, 1), c->Dim(x, 2), c->Dim(x, 3), channels}));
      auto state = c->MakeShape({steps, directions, units, rows});
      c->set_output(1, state);
      c->set_output(2, state);
      c->set_output(3, c->MakeShape({steps, directions, acts_rows, rows}));
      return Status();
    });

REGISTER_OP("TfnhrMdlstmScanBackward")
    .Input("dy: T")
    .Input("x: T")
    .Input("mask: T")
    .Input("w_top: T")
    .Input("w_bot: T")
    .Input("output_peephole: T")
    .Input("h: T")
    .Input("s: T")
    .Input("acts: T")
    .Output("dx: T")
    .Output("doutput_peephole: T")
    .Output("dw_top: T")
    .Output("dw_bot: T")
    .Attr("T: {float, double}")
    .Attr("cell: {'leaky_lp', 'leaky_lp_new_state', 'lstm'}")
    .Attr("in_loop: bool")
    .SetShapeFn([](tfnhr::InferenceContext* c) {
      c->set_output(0, c->input(1));
      c->set_output(1, c->input(5));
      c->set_output(2, c->input(3));
      c->set_output(3, c->input(4));
      return Status();
    });

#define TFNHR_REGISTER(T)                                                                   \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("TfnhrMdlstmScanForward").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
      tfnhr::ScanForwardOp<T>);                                                             \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("TfnhrMdlstmScanBackward").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
      tfnhr::ScanBackwardOp<T>);

TFNHR_REGISTER(float)
TFNHR_REGISTER(double)

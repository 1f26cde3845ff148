/* The math library: the same straight-line programs the native backend
 * compiles (presk/emit/mathlib.py). Compile with -ffp-contract=off. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifndef PRESK_MATHLIB_HELPERS_F32
#define PRESK_MATHLIB_HELPERS_F32
static inline float presk_pow2_f32(float k) {
    if (!(k >= -126.0f)) k = -126.0f;
    if (k > 127.0f) k = 127.0f;
    uint32_t b = (uint32_t)((int32_t)k + 127) << 23;
    float r; memcpy(&r, &b, 4); return r;
}
static inline float presk_exponent_f32(float x) {
    uint32_t b; memcpy(&b, &x, 4);
    return (float)((int32_t)((b >> 23) & 255u) - 127);
}
static inline float presk_mantissa_f32(float x) {
    uint32_t b; memcpy(&b, &x, 4);
    b = (b & (((uint32_t)1 << 23) - 1)) | ((uint32_t)127 << 23);
    float r; memcpy(&r, &b, 4); return r;
}
#endif

float presk_erf_f32(float x);
float presk_erf_f32(float x) {
    const float v0 = x;
    const float v1 = fabsf(v0);
    const float v2 = v0 * v0;
    const float v3 = 0x1.8000000000000p+0f;
    const int v4 = v1 < v3;
    const float v5 = 0x1.2000000000000p+1f;
    const int v6 = v1 < v5;
    const float v7 = 0x1.8000000000000p+1f;
    const int v8 = v1 < v7;
    const float v9 = 0x1.2000000000000p+0f;
    const float v10 = 0x1.e000000000000p+0f;
    const float v11 = 0x1.5000000000000p+1f;
    const float v12 = 0x1.c000000000000p+1f;
    const float v13 = v8 ? v11 : v12;
    const float v14 = v6 ? v10 : v13;
    const float v15 = v4 ? v9 : v14;
    const float v16 = v1 - v15;
    const float v17 = -0x1.73f6200000000p-8f;
    const float v18 = 0x1.5745020000000p-10f;
    const float v19 = 0x0.0p+0f;
    const float v20 = 0x0.0p+0f;
    const float v21 = v8 ? v19 : v20;
    const float v22 = v6 ? v18 : v21;
    const float v23 = v4 ? v17 : v22;
    const float v24 = v23 * v16;
    const float v25 = 0x1.36b22c0000000p-7f;
    const float v26 = -0x1.3b2b3a0000000p-8f;
    const float v27 = 0x1.4e31b60000000p-11f;
    const float v28 = 0x1.147c300000000p-14f;
    const float v29 = v8 ? v27 : v28;
    const float v30 = v6 ? v26 : v29;
    const float v31 = v4 ? v25 : v30;
    const float v32 = v24 + v31;
    const float v33 = v32 * v16;
    const float v34 = 0x1.fbe4680000000p-7f;
    const float v35 = 0x1.0dde6e0000000p-8f;
    const float v36 = -0x1.24b3640000000p-9f;
    const float v37 = -0x1.912cf60000000p-14f;
    const float v38 = v8 ? v36 : v37;
    const float v39 = v6 ? v35 : v38;
    const float v40 = v4 ? v34 : v39;
    const float v41 = v33 + v40;
    const float v42 = v41 * v16;
    const float v43 = -0x1.f640a00000000p-5f;
    const float v44 = 0x1.77304c0000000p-7f;
    const float v45 = 0x1.14ac960000000p-8f;
    const float v46 = 0x1.53589a0000000p-14f;
    const float v47 = v8 ? v45 : v46;
    const float v48 = v6 ? v44 : v47;
    const float v49 = v4 ? v43 : v48;
    const float v50 = v42 + v49;
    const float v51 = v50 * v16;
    const float v52 = 0x1.ca56960000000p-6f;
    const float v53 = -0x1.5a326e0000000p-5f;
    const float v54 = -0x1.62eac60000000p-8f;
    const float v55 = -0x1.1024300000000p-14f;
    const float v56 = v8 ? v54 : v55;
    const float v57 = v6 ? v53 : v56;
    const float v58 = v4 ? v52 : v57;
    const float v59 = v51 + v58;
    const float v60 = v59 * v16;
    const float v61 = 0x1.4cb3880000000p-3f;
    const float v62 = 0x1.143da20000000p-4f;
    const float v63 = 0x1.407dee0000000p-8f;
    const float v64 = 0x1.634eee0000000p-15f;
    const float v65 = v8 ? v63 : v64;
    const float v66 = v6 ? v62 : v65;
    const float v67 = v4 ? v61 : v66;
    const float v68 = v60 + v67;
    const float v69 = v68 * v16;
    const float v70 = -0x1.6ea6d00000000p-2f;
    const float v71 = -0x1.01a1c60000000p-4f;
    const float v72 = -0x1.8af0020000000p-9f;
    const float v73 = -0x1.3f720a0000000p-16f;
    const float v74 = v8 ? v72 : v73;
    const float v75 = v6 ? v71 : v74;
    const float v76 = v4 ? v70 : v75;
    const float v77 = v69 + v76;
    const float v78 = v77 * v16;
    const float v79 = 0x1.45e99c0000000p-2f;
    const float v80 = 0x1.12ceb00000000p-5f;
    const float v81 = 0x1.2ce8a00000000p-10f;
    const float v82 = 0x1.6a51520000000p-18f;
    const float v83 = v8 ? v81 : v82;
    const float v84 = v6 ? v80 : v83;
    const float v85 = v4 ? v79 : v84;
    const float v86 = v78 + v85;
    const float v87 = v86 * v16;
    const float v88 = -0x1.c9296c0000000p-4f;
    const float v89 = -0x1.0678440000000p-7f;
    const float v90 = -0x1.aeb45a0000000p-13f;
    const float v91 = -0x1.8e59940000000p-21f;
    const float v92 = v8 ? v90 : v91;
    const float v93 = v6 ? v89 : v92;
    const float v94 = v4 ? v88 : v93;
    const float v95 = v87 + v94;
    const float v96 = 0x1.0000000000000p+0f;
    const float v97 = v96 + v95;
    const float v98 = 0x1.0000000000000p+2f;
    const int v99 = v1 < v98;
    const float v100 = 0x1.0000000000000p+0f;
    const float v101 = v99 ? v97 : v100;
    const float v102 = 0x0.0p+0f;
    const int v103 = v0 < v102;
    const float v104 = -v101;
    const float v105 = v103 ? v104 : v101;
    const float v106 = -0x1.623bf00000000p-11f;
    const float v107 = v106 * v2;
    const float v108 = 0x1.4f3d080000000p-8f;
    const float v109 = v107 + v108;
    const float v110 = v109 * v2;
    const float v111 = -0x1.b7aaa00000000p-6f;
    const float v112 = v110 + v111;
    const float v113 = v112 * v2;
    const float v114 = 0x1.ce2ae20000000p-4f;
    const float v115 = v113 + v114;
    const float v116 = v115 * v2;
    const float v117 = -0x1.81273a0000000p-2f;
    const float v118 = v116 + v117;
    const float v119 = v118 * v2;
    const float v120 = 0x1.06eba80000000p-3f;
    const float v121 = v119 + v120;
    const float v122 = v0 * v121;
    const float v123 = v0 + v122;
    const float v124 = 0x1.8000000000000p-1f;
    const int v125 = v1 < v124;
    const float v126 = v125 ? v123 : v105;
    const int v127 = v0 != v0;
    const float v128 = v127 ? v0 : v126;
    return v128;
}
